"""Small pieces the human-readable exports share, so they say things the same way."""

from __future__ import annotations

from app.history import timestamps
from app.history.records import INTERRUPTED, JSON_REPLY, StoredConversation, StoredMessage
from app.rendering.markdown_html import json_markdown
from app.rendering.tool_parts import message_markdown

ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}


def when(ts: float) -> str:
    """Local time with its UTC offset: readable, and unambiguous once shared."""
    return timestamps.shown(ts, "%Y-%m-%d %H:%M:%S %z")  # "?" for a time no clock produced


def stamp(m: StoredMessage) -> str:
    """The message's own time. A reply's row is written with its question, in the same
    transaction and at the same instant, so its created_at is the question's; its
    updated_at is when it was sealed (or last saved, if it was cut off), which is when
    it was written. A stored updated_at no clock produced falls back to created_at."""
    if m.role == "assistant" and timestamps.in_range(m.updated_at) and m.updated_at >= m.created_at:
        return when(m.updated_at)
    return when(m.created_at)


def marks(m: StoredMessage) -> list[str]:
    out = []
    if m.state == INTERRUPTED:
        out.append("interrupted")
    elif m.state == "generating":
        out.append("still generating")
    if m.out_of_context:
        out.append("out of context")
    return out


def reply_markdown(m: StoredMessage) -> str:
    """A reply's text as Markdown: a reply held to JSON as its JSON code block, else as written;
    its tool calls, or a tool's result, as what they are (app.rendering.tool_parts)."""
    text = json_markdown(m.content) if m.format == JSON_REPLY and m.content else m.content
    return message_markdown(m, text)


def has_body(m: StoredMessage) -> bool:
    return bool(m.content or m.tool_calls or m.role == "tool")


def header_facts(conv: StoredConversation) -> list[str]:
    facts = [f"Conversation {conv.id}", f"created {when(conv.created_at)}",
             f"updated {when(conv.updated_at)}", f"{len(conv.messages)} messages"]
    if conv.model:
        facts.append(f"model {conv.model}")
    held = reply_format_fact(conv.reply_format)
    if held:
        facts.append(held)
    tools = tools_fact(conv.tools)
    if tools:
        facts.append(tools)
    return facts


def tools_fact(tools: dict | None) -> str | None:
    """The tools the conversation's turns may call, by name, as the header says it."""
    if not isinstance(tools, dict):
        return None
    names = [n for n in tools.get("builtin") or [] if isinstance(n, str)]
    for d in tools.get("declared") or []:
        f = d.get("function") if isinstance(d, dict) else None
        if isinstance(f, dict) and isinstance(f.get("name"), str):
            names.append(f["name"])
    return f"tools: {', '.join(names)}" if names else None


def reply_format_fact(fmt: dict | None) -> str | None:
    """What the conversation's next replies are held to, as the header says it (the JSON
    transcript carries the schema itself); None for free text."""
    if not isinstance(fmt, dict):
        return None
    if fmt.get("mode") == "json":
        return "replies in JSON"
    if fmt.get("mode") == "schema":
        name = fmt.get("name")
        return "replies to a JSON schema" + (f" ({name})" if isinstance(name, str) and name else "")
    return None


def title(conv: StoredConversation) -> str:
    return conv.title or "Untitled conversation"
