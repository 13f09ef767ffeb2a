"""The conversation being chatted in (LiveConversation), as plain data (no Qt).

Kept apart from the widgets so the store can load it and the recorder save it
without knowing about the view, and so tests can check regenerate/edit logic
without a window. Indices here are the ones `LocalChatEngine.reply(...).dropped`
refers to: the history passed to the engine is `messages` in order. Its only
file format is the store's transcript (app/history/transcript.py).

Its documents are the attachments of the user messages on the path shown, in
order: a document given once stays with the conversation for every later turn
of that branch (each turn is given it again, whole or retrieved, by
app.chat.documents), and an edit that leaves the branch leaves its documents
with it. Their texts are held by hash beside the messages, as the store keeps
them. Its chosen collections live in its settings, so they reopen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.chat.reply_format import ReplyFormat, ReplyFormatError
from app.chat.tool_set import ToolSet, ToolSetError
from app.engine.message import Attachment, MessageBody, ToolCall
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.history.records import COMPLETE, StoredConversation

Attached = tuple[Attachment, str, tuple[int, ...]]  # an attachment, its text, its pages' starts


@dataclass(kw_only=True)
class LiveMessage(MessageBody):
    """A message as the chat holds it: its body, and what the window draws beside it."""

    stats: ReplyStats | None = None
    out_of_context: bool = False  # the context budget left it out of the last prompt
    id: int | None = None  # the store's message id, once saved
    state: str = COMPLETE  # INTERRUPTED: cut off (an error, a crash, a switch) with its text kept
    format: str | None = None  # JSON_REPLY: held to JSON, drawn as a JSON code block; None: Markdown
    # The saved messages that follow what this one follows, itself among them, oldest first (its
    # question's edited versions, or its reply's regenerations): the view's "2 / 3" switcher.
    alternatives: tuple[int, ...] = ()

    def version(self) -> tuple[int, int] | None:
        """(this one's place from 1, how many) when it has alternatives, else None."""
        if len(self.alternatives) < 2 or self.id not in self.alternatives:
            return None
        return self.alternatives.index(self.id) + 1, len(self.alternatives)

    def branched(self, new_id: int | None) -> tuple[int, ...]:
        """The alternatives once `new_id` is added beside this message."""
        have = self.alternatives or ((self.id,) if self.id is not None else ())
        return (*have, new_id) if new_id is not None else have


def made_with(model: dict | None, s: GenerationSettings) -> str:
    """What wrote a reply, in the words its footer uses beside its other versions: regenerating
    with another model or temperature is a comparison the user reads there."""
    sampling = ("greedy" if s.temperature == 0 else
                f"temperature {s.temperature:g} · top-p {s.top_p:g} · top-k {s.top_k}")
    seed = f" · seed {s.seed}" if s.seed is not None and s.seed >= 0 else ""
    name = (model or {}).get("file")
    return f"{name} · {sampling}{seed}" if name else f"{sampling}{seed}"


@dataclass
class LiveConversation:
    system_prompt: str = ""
    messages: list[LiveMessage] = field(default_factory=list)
    title: str = ""
    id: int | None = None  # the store's conversation id, once saved
    reply_format: ReplyFormat = field(default_factory=ReplyFormat)  # what its next replies must be
    # Why the stored reply format could not be used (it reads as text then), said once on opening.
    format_note: str | None = None
    tools: ToolSet = field(default_factory=ToolSet)  # what its next replies may call
    # Replies of its current turn that called tools (the tool loop's bound); kept with the
    # conversation, since its turn may go on while another conversation is shown.
    tool_rounds: int = 0
    # How a thinking model thinks in this conversation's next replies (GenerationSettings.think
    # and think_budget): None follows the template's default, and no budget.
    think: bool | str | None = None
    think_budget: int | None = None
    # The collections its turns search (names of `llamadesk docs add` folders), saved in settings.
    collections: list[str] = field(default_factory=list)
    # The texts its attachments name, by sha256: (text, each PDF page's start offset).
    documents: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    def attachments(self) -> list[Attachment]:
        """The documents of the path shown, in the order they were given, each once."""
        seen: dict[str, Attachment] = {}
        for m in self.messages:
            for a in m.attachments:
                seen.setdefault(a.sha256, a)
        return list(seen.values())

    def keep_document(self, sha256: str, text: str, page_starts: tuple[int, ...] = ()) -> None:
        """Hold an attachment's text (app.docs' Extracted) for the turns that follow."""
        self.documents[sha256] = (text, tuple(page_starts))

    def attached(self, pending: list[Attachment] | None = None) -> list[Attached]:
        """What app.chat.documents.plan_turn is given: the path's attachments and then `pending`
        (the question's own), each with its text; one whose text is not held is left out."""
        out, seen = [], set()
        for a in [*self.attachments(), *(pending or [])]:
            if a.sha256 in self.documents and a.sha256 not in seen:
                seen.add(a.sha256)
                text, starts = self.documents[a.sha256]
                out.append((a, text, starts))
        return out

    def waiting_calls(self) -> list[ToolCall]:
        """The last reply's calls that have no result yet (a declared tool's: the user answers)."""
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
        return [c for c in (last.tool_calls if last else ()) if c.id not in answered]

    def history(self, upto: int | None = None) -> list[MessageBody]:
        """What the engine sees as earlier turns (everything before `upto`)."""
        msgs = self.messages if upto is None else self.messages[:upto]
        return [m.body() for m in msgs]

    def system(self) -> str | None:
        return self.system_prompt.strip() or None

    def add(self, role: str, content: str, stats: ReplyStats | None = None) -> int:
        self.messages.append(LiveMessage(role, content, stats=stats))
        if not self.title and role == "user":
            self.title = content.strip().splitlines()[0][:60] if content.strip() else ""
        return len(self.messages) - 1

    def last_user_index(self) -> int | None:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                return i
        return None

    def can_regenerate(self) -> bool:
        return bool(self.messages) and self.messages[-1].role == "assistant" \
            and self.last_user_index() is not None

    def take_from(self, index: int) -> list[LiveMessage]:
        """Remove message `index` and everything after it from the path (an edit, a regeneration:
        the store keeps them as a branch); return what was removed."""
        removed = self.messages[index:]
        del self.messages[index:]
        return removed

    def parent_for(self, index: int) -> int | None:
        """The saved message a new one at `index` follows: the one before it (None: the first)."""
        return self.messages[index - 1].id if index > 0 else None

    def take_last_exchange(self) -> tuple[str, list[LiveMessage]] | None:
        """Remove the last user message and everything after it; return its text
        and the removed messages (so a store can delete them too).

        Regenerate and edit-and-resend both start here: the engine is then asked
        the same (or edited) question with the same earlier history, so the KV
        cache still holds that history and only the question is prefilled again.
        """
        i = self.last_user_index()
        if i is None:
            return None
        removed = self.messages[i:]
        del self.messages[i:]
        return removed[0].content, removed

    def mark_dropped(self, dropped: list[int]) -> list[int]:
        """Flag the messages the last prompt left out; return indices whose flag changed."""
        gone = set(dropped)
        changed = []
        for i, m in enumerate(self.messages):
            flag = i in gone
            if m.out_of_context != flag:
                m.out_of_context = flag
                changed.append(i)
        return changed

    @classmethod
    def from_store(cls, stored: StoredConversation) -> LiveConversation:
        """From app.history.records.StoredConversation: what reopening a saved chat shows.

        A reply cut off before its first token has nothing to show or send, so
        it is left out (as the store's own history() leaves it out).
        """
        msgs = [LiveMessage(**vars(m.body()), stats=m.stats, out_of_context=m.out_of_context, id=m.id,
                            state=m.state, format=m.format, alternatives=tuple(stored.alternatives(m)))
                for m in stored.messages if m.role in ("user", "assistant", "tool")
                and not (m.role == "assistant" and m.state != COMPLETE and not (m.content or m.tool_calls))]
        conv = cls(stored.system_prompt or "", msgs, stored.title, stored.id)
        chosen = (stored.settings or {}).get("collections")
        conv.collections = [n for n in chosen if isinstance(n, str)] if isinstance(chosen, list) else []
        for sha, d in (stored.documents or {}).items():
            conv.keep_document(sha, d["text"], tuple(d.get("page_starts") or ()))
        try:
            conv.reply_format = ReplyFormat.from_json(stored.reply_format)
        except ReplyFormatError as e:
            conv.format_note = f"This conversation's reply format cannot be used ({e}); its replies are text"
        try:
            conv.tools = ToolSet.from_json(stored.tools)
        except ToolSetError as e:
            conv.format_note = f"This conversation's tools cannot be used ({e}); it has none"
        return conv
