"""Small pieces the human-readable exports share, so they say things the same way.

A conversation is a tree; the Markdown, HTML and text exports write the path
shown (`conv.messages`), a message with alternatives marked "version 2 of 3"
as the window's switcher counts them. With `all_branches` they write every
branch as a section after the path shown, each from where it leaves what was
written before ("Branch 2 of 3, after message 4"), not the tree in one piece:
a file is read top to bottom, and a section that reads as a conversation (the
path shown whole, then each other branch as what was said instead from that
message on) can be followed without holding a tree in mind, where the tree
written in one piece would put each answer away from its question as soon as
two branches interleave. The shared part of a branch is not written twice:
its first message names the message it continues after, with the message ids
shown (as `llamadesk list ID --tree` shows them and `ask --from` takes them).

A thinking model's reasoning comes before its answer, folded where the format
can fold (HTML, and Markdown through `<details>`) and marked off where it
cannot (text), under one label: "Thought for 12.4 s · 431 tokens". A reply
without reasoning is written exactly as before.

A question's attachments are named under it, and a reply given documents says how (whole, or
the passages retrieved) and lists its numbered sources, as the prompt numbered them for the
model to cite; a tool's result names the MCP server that answered it in its heading. A
conversation without any of these is written exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.message import DOCS_WHOLE, Attachment, DocsUse, Source
from app.history import timestamps, transcript
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


def marks(m: StoredMessage, version: tuple[int, int] | None = None) -> list[str]:
    """What a message's heading says besides its role: its version among its alternatives (see
    versions()), and whether it was edited, cut off or left out of the context."""
    out = [f"version {version[0]} of {version[1]}"] if version else []
    if m.edited:
        out.append("edited")
    if m.state == INTERRUPTED:
        out.append("interrupted")
    elif m.state == "generating":
        out.append("still generating")
    if m.out_of_context:
        out.append("out of context")
    if m.role == "tool" and m.tool_server:
        out.append(f"MCP server {m.tool_server}")
    return out


def attachment_label(a: Attachment) -> str:
    """An attachment as its chip says it: its name, kind, pages and tokens."""
    facts = [a.kind] + ([f"{a.pages} pages" if a.pages != 1 else "1 page"] if a.pages else [])
    if a.tokens:
        facts.append(f"{a.tokens:,} tokens")
    return f"{a.name} ({', '.join(facts)})"


def docs_label(d: DocsUse) -> str:
    """How a reply was given its documents: whole, or how many passages were retrieved."""
    if d.mode == DOCS_WHOLE:
        return f"Documents given whole · {d.tokens:,} tokens"
    n = len(d.sources)
    return f"Retrieved {n} passage{'s' if n != 1 else ''} · {d.tokens:,} tokens"


def source_label(s: Source) -> str:
    """One numbered source: the document, where in it, and its first words."""
    where = f", {s.where}" if s.where else ""
    coll = f" (collection {s.collection})" if s.collection else ""
    snippet = " ".join(s.snippet.split())
    return f"[{s.n}] {s.document}{where}{coll}" + (f": “{snippet}”" if snippet else "")


def reply_markdown(m: StoredMessage) -> str:
    """A reply's text as Markdown: a reply held to JSON as its JSON code block, else as written;
    its tool calls, or a tool's result, as what they are (app.rendering.tool_parts)."""
    text = json_markdown(m.content) if m.format == JSON_REPLY and m.content else m.content
    return message_markdown(m, text)


def has_body(m: StoredMessage) -> bool:
    return bool(m.content or m.tool_calls or m.role == "tool")


def thought_label(m: StoredMessage) -> str:
    """What a reply's folded reasoning is called: the stats record's own words, as the window's
    folded block says them ("Thought for 12.4 s · 431 tokens"), or "Thinking" when its stats
    tell neither figure."""
    return (m.stats.thought() if m.stats is not None else None) or "Thinking"


def header_facts(conv: StoredConversation, all_branches: bool = False) -> list[str]:
    facts = [f"Conversation {conv.id}", f"created {when(conv.created_at)}",
             f"updated {when(conv.updated_at)}", _count(conv, all_branches)]
    if conv.model:
        facts.append(f"model {conv.model}")
    held = reply_format_fact(conv.reply_format)
    if held:
        facts.append(held)
    tools = tools_fact(conv.tools)
    if tools:
        facts.append(tools)
    return facts


def _count(conv: StoredConversation, all_branches: bool) -> str:
    n = len(branches(conv)) if len(conv.tree) > len(conv.messages) else 1
    if n == 1:
        return f"{len(conv.messages)} messages"
    if all_branches:
        return f"{len(conv.tree)} messages on {n} branches"
    return f"{len(conv.messages)} messages shown ({len(conv.tree)} on {n} branches)"


def versions(conv: StoredConversation) -> dict[int, tuple[int, int]]:
    """Each message with alternatives (the messages that follow what it follows): its place from 1
    and how many, oldest first, as StoredConversation.alternatives counts them; in one pass, so a
    conversation of thousands of messages exports in no time."""
    by_parent: dict[int | None, list[int]] = {}
    for m in conv.tree:
        by_parent.setdefault(m.parent_id, []).append(m.id)
    return {i: (k + 1, len(ids)) for ids in by_parent.values() if len(ids) > 1 for k, i in enumerate(ids)}


@dataclass
class Branch:
    """One section of an all-branches export: what it adds, after which message."""

    number: int  # from 1: the path shown
    messages: list[StoredMessage]  # from where it leaves what was written before, to its end
    after: StoredMessage | None  # the message it continues after; None: from the start (or the path shown)


def branches(conv: StoredConversation) -> list[Branch]:
    """The path shown whole, then every other branch once, in the tree's order (oldest reply or
    version first), each from where it leaves the ones written before it. Every message of the
    tree is in exactly one; a tree a hand-edited database bent is read as the JSON export writes
    it (a loop or a lost parent starts again from a first message)."""
    if not conv.tree:  # held in memory, or read from a version 1 file: a line
        return [Branch(1, list(conv.messages), None)]
    rows, parents = transcript.written_tree(conv)
    kids: dict[int | None, list[StoredMessage]] = {}
    for m, p in zip(rows, parents, strict=True):
        kids.setdefault(p, []).append(m)
    parent = {m.id: p for m, p in zip(rows, parents, strict=True)}
    by_id = {m.id: m for m in rows}
    out = [Branch(1, list(conv.messages), None)]
    written = {m.id for m in conv.messages}
    stack = list(reversed(kids.get(None, [])))
    while stack:  # depth first, oldest child first: each leaf ends one branch
        m = stack.pop()
        below = kids.get(m.id, [])
        stack.extend(reversed(below))
        if below or m.id in written:
            continue
        part: list[StoredMessage] = []
        cur: int | None = m.id
        while cur is not None and cur not in written:
            part.append(by_id[cur])
            written.add(cur)
            cur = parent[cur]
        out.append(Branch(len(out) + 1, part[::-1], by_id.get(cur) if cur is not None else None))
    return out


def snippet(m: StoredMessage, width: int = 50) -> str:
    """A message in a few words on one line: its text, or the tools it called, or "(empty)"."""
    text = " ".join(m.content.split())
    if not text and m.tool_calls:
        text = "called " + ", ".join(c.name for c in m.tool_calls)
    if m.role == "tool" and m.tool_name:
        text = f"{m.tool_name}: {text}"
    if not text:
        return "(empty)"
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def branch_heading(b: Branch, total: int) -> str:
    """A section's title: which branch, and where it leaves the ones before."""
    if b.number == 1:
        return f"Branch 1 of {total}: the path shown"
    if b.after is None:
        return f"Branch {b.number} of {total}: from the start"
    who = ROLE_NAMES.get(b.after.role, b.after.role)
    return f"Branch {b.number} of {total}: after message {b.after.id} ({who}: “{snippet(b.after, 40)}”)"


def sections(conv: StoredConversation, all_branches: bool) -> list[Branch]:
    """What an export writes: the path shown alone, or every branch (one branch: the same)."""
    return branches(conv) if all_branches and conv.tree else [Branch(1, list(conv.messages), None)]


def heading_marks(m: StoredMessage, version: tuple[int, int] | None, with_id: bool) -> list[str]:
    """A message heading's parentheses: its id when branches are written (a section names the
    message it continues after by it), then marks()."""
    return ([f"message {m.id}"] if with_id else []) + marks(m, version)


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
