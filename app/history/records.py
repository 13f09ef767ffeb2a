"""Plain records the store returns, shared by the window, the CLI and the exports.

They carry no database handle, so a loaded conversation can be rendered,
exported or handed to another thread without keeping the store busy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.message import MessageBody
from app.engine.stats import ReplyStats

# A reply still streaming; after a crash the next open turns it into INTERRUPTED.
COMPLETE, GENERATING, INTERRUPTED = "complete", "generating", "interrupted"
STATES = (COMPLETE, GENERATING, INTERRUPTED)
# A reply held to JSON by its constraint: shown and exported as a JSON code block, not Markdown.
JSON_REPLY = "json"
FORMATS = (JSON_REPLY,)


@dataclass(kw_only=True)
class StoredMessage(MessageBody):
    """A message as the store keeps it: its body, and the row's ids, times and state."""

    id: int
    conversation_id: int
    created_at: float
    updated_at: float
    state: str = COMPLETE
    stats: ReplyStats | None = None
    out_of_context: bool = False  # left out of the latest reply's prompt by the context budget
    format: str | None = None  # JSON_REPLY: held to JSON; None: Markdown text


@dataclass
class ConversationSummary:
    """One row of the conversation list: enough to draw it without the messages."""

    id: int
    title: str
    created_at: float
    updated_at: float
    message_count: int
    model: str | None = None


@dataclass
class StoredConversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    system_prompt: str | None = None
    model: str | None = None
    settings: dict = field(default_factory=dict)
    messages: list[StoredMessage] = field(default_factory=list)
    # The window's reply format for the next turns (app.chat.reply_format reads it); None: text.
    reply_format: dict | None = None
    # The tools its turns may call (app.chat.tool_set reads it); None: none.
    tools: dict | None = None
    # Every message of every branch, oldest first; `messages` is the path shown, from the first
    # message to `active_leaf` (what the engine is sent, what an export writes).
    tree: list[StoredMessage] = field(default_factory=list)
    active_leaf: int | None = None
    # The texts its attachments name, by sha256 ({name, kind, pages, text, page_starts}: the
    # transcript's form), filled by the store (app.history.documents) and a transcript's import.
    documents: dict[str, dict] = field(default_factory=dict)

    def alternatives(self, msg: StoredMessage) -> list[int]:
        """The ids of the messages that follow what `msg` follows, `msg` among them, oldest first:
        an edited question's versions, a regenerated reply's."""
        return [m.id for m in self.tree if m.parent_id == msg.parent_id]

    def children(self, msg_id: int | None) -> list[StoredMessage]:
        return [m for m in self.tree if m.parent_id == msg_id]

    def history(self) -> tuple[list[MessageBody], list[int]]:
        """The turns to send to the engine, and the message id of each.

        A reply still generating (another process's) is left out, and so is
        an empty one (cut off before its first token, or while it was still
        reasoning: the model would read it as a turn that said nothing; one
        that only made tool calls is not empty); tool calls and results go as
        they are (a reply's reasoning with it, for the engine's template to
        keep or drop), for the engine to
        write in its own way; interrupted partial replies stay in,
        as the user saw them. The ids let the caller map `Reply.dropped`
        (indices) back to messages to mark them.
        """
        msgs, ids = [], []
        for m in self.messages:
            if m.role == "assistant" and (m.state == GENERATING or not (m.content or m.tool_calls)):
                continue
            if m.role in ("user", "assistant", "tool"):
                msgs.append(m.body())
                ids.append(m.id)
        return msgs, ids


@dataclass
class SearchHit:
    conversation_id: int
    title: str
    message_id: int
    role: str
    snippet: str  # the matching text with some context, on one line
    in_reasoning: bool = False  # only the reply's reasoning matched: the snippet is from there
