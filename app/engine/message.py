"""What one turn of a conversation says: its role, its text and its tool parts.

One type, because the same turn is three things in turn: a prompt message the
engine renders, a live message the window holds while you chat, and a stored
row the history keeps. Each of those adds only what is its own (stats and the
context marker live, ids and times stored) on top of this body, so a field a
turn gains (its reasoning, its attachments, its branch's parent) is written
here once and reaches the prompt, the window and the store alike, instead of
being copied into three records and the conversions between them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant turn made: the tool's name and its arguments as the JSON text the
    model wrote (OpenAI's wire form, kept as written so a call reads back exactly)."""

    id: str
    name: str
    arguments: str


@dataclass
class MessageBody:
    role: str  # one of ROLES; "tool" is a call's result
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant turn's calls (its content may be empty)
    tool_call_id: str | None = None  # a "tool" turn: the call whose result it is
    tool_name: str | None = None  # a "tool" turn: the tool that answered
    # Where it stands in its conversation's tree: the message it follows (None: the first, or
    # not saved), and whether the user rewrote it (an assistant reply edited by hand).
    parent_id: int | None = None
    edited: bool = False
    # What a thinking model wrote before its answer, kept apart from `content` so it is shown
    # folded, stored and searched on its own, and left out of a later prompt unless the
    # template keeps it ("" : none). The answer alone is `content`.
    reasoning: str = ""

    def body(self) -> MessageBody:
        """The turn's words alone, detached from whatever holds them: what an engine is handed,
        so the window may change its own message while another thread renders the prompt."""
        return MessageBody(**{f.name: getattr(self, f.name) for f in fields(MessageBody)})

    def problem(self) -> str | None:
        """Why this body cannot be a turn, in one line, or None: the rules every holder keeps."""
        if self.role not in ROLES:
            return f"unknown message role {self.role!r}"
        if (self.role == "tool") != (self.tool_name is not None):
            return "a tool message needs a tool_name, and only a tool message has one"
        if self.tool_calls and self.role != "assistant":
            return "it has tool_calls, which only an assistant message makes"
        return None
