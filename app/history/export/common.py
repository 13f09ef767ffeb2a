"""Small pieces the human-readable exports share, so they say things the same way."""

from __future__ import annotations

from app.history import timestamps
from app.history.export.rendering import json_markdown
from app.history.records import INTERRUPTED, JSON_REPLY, StoredConversation, StoredMessage

ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System"}


def when(ts: float) -> str:
    """Local time with its UTC offset: readable, and unambiguous once shared."""
    return timestamps.shown(ts, "%Y-%m-%d %H:%M:%S %z")  # "?" for a time no clock produced


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
    """A reply's text as Markdown: a reply held to JSON as its JSON code block, else as written."""
    return json_markdown(m.content) if m.format == JSON_REPLY else m.content


def header_facts(conv: StoredConversation) -> list[str]:
    facts = [f"Conversation {conv.id}", f"created {when(conv.created_at)}",
             f"updated {when(conv.updated_at)}", f"{len(conv.messages)} messages"]
    if conv.model:
        facts.append(f"model {conv.model}")
    held = reply_format_fact(conv.reply_format)
    if held:
        facts.append(held)
    return facts


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
