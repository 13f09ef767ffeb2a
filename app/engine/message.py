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

from dataclasses import asdict, dataclass, fields

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    """One call an assistant turn made: the tool's name and its arguments as the JSON text the
    model wrote (OpenAI's wire form, kept as written so a call reads back exactly)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Attachment:
    """A document given with a user turn. The turn keeps what names the text (its hash); the store
    keeps the extracted text once per hash (app.history: `documents`), so a reopened conversation
    has the words the model read even when the file has moved or changed since."""

    name: str  # the file's name, as its chip shows it
    sha256: str  # hex digest of the extracted text (UTF-8): the key the text is kept under
    kind: str  # "pdf", "docx", "html", "markdown", "code" or "text"
    pages: int = 0  # a PDF's pages; 0 for the others
    tokens: int = 0  # the extracted text's tokens in the model it was attached under (0: not counted)
    chars: int = 0  # the extracted text's length
    path: str = ""  # where it was read from, for the user; never read again

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Attachment:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class Source:
    """One passage a reply was given, numbered as the prompt told the model to cite it ([n])."""

    n: int
    document: str  # the document's name
    sha256: str  # its text's hash: an attachment's, or a collection file's
    where: str = ""  # "page 3", "Install > Linux": where in the document, for the user
    start: int = 0  # the passage's character span in the document's text, to show it in place
    end: int = 0
    snippet: str = ""  # its first words, one line
    collection: str | None = None  # the collection it came from (None: an attachment)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Source:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


DOCS_WHOLE, DOCS_RETRIEVED = "whole", "retrieved"


@dataclass(frozen=True)
class DocsUse:
    """What documents a reply was given and how: whole (they fit with room for the answer) or
    retrieved passages; said on the reply, exported, and read back to show its sources."""

    mode: str  # DOCS_WHOLE or DOCS_RETRIEVED
    tokens: int  # prompt tokens the documents took
    sources: tuple[Source, ...] = ()

    def to_json(self) -> dict:
        return {"mode": self.mode, "tokens": self.tokens, "sources": [s.to_json() for s in self.sources]}

    @classmethod
    def from_json(cls, d: dict) -> DocsUse:
        return cls(d["mode"], int(d.get("tokens", 0)),
                   tuple(Source.from_json(s) for s in d.get("sources", ())))


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
    # A "tool" turn answered by an MCP server: the server's name (None: a built-in or declared
    # tool), so a transcript and an export say where each call went.
    tool_server: str | None = None
    # A user turn: the documents given with it. They belong to the conversation from there on
    # (every later turn of this branch may draw on them).
    attachments: tuple[Attachment, ...] = ()
    # An assistant turn: the documents it was given, whole or retrieved, and its numbered sources.
    docs: DocsUse | None = None

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
        if self.tool_server is not None and self.role != "tool":
            return "it names a tool server, which only a tool message has"
        if self.attachments and self.role != "user":
            return "it has attachments, which only a user message has"
        if self.docs is not None and self.role != "assistant":
            return "it has documents' sources, which only an assistant message has"
        return None
