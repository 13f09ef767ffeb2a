"""The documents of a chat turn: what a question sends with its attachments and collections.

A question goes with the chips above the box and with every document attached
earlier on the path shown (they belong to the conversation from there on), and
searches the conversation's chosen collections. app.chat.documents decides how
(whole when they fit the room the context has left, the passages retrieved
when not) exactly as `llamadesk ask --attach/--docs` does; this mixin gives it
the window's figures: the loaded model's token count, the context length, the
reply's budget. The plan is made on the GUI thread from texts already read (a
chip's text was extracted off it), with the model's vocabulary only, no llama
context. ChatFlow (app.ui.chat.flow) is the one class that mixes this in.

The texts of the attachments are held by the conversation (by hash), so a
source opens and a later turn reads them again even when the chat is not
saved; a reopened conversation's come from the history store, which keeps
them once per hash, and are saved with the question through TurnRecorder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.chat.conversation import LiveConversation
from app.chat.documents import plan_turn, room_tokens
from app.docs.index import DocsIndex
from app.engine.loader import LoadedModel
from app.engine.message import Attachment, MessageBody
from app.engine.prompt import chat_format
from app.engine.sampling import GenerationSettings
from app.history.errors import StoreError

if TYPE_CHECKING:
    from app.chat.doc_prompt import DocsPlan
    from app.chat.recorder import TurnRecorder
    from app.ui.widgets.message_bar import MessageBar


@dataclass
class _Window:
    """What app.chat.documents.room_tokens reads of an engine: its context length (and, having no
    prompt_tokens, it counts the history's words with the count it is given: a server's)."""

    n_ctx: int


class PromptMeasure:
    """The chat's prompt measured as the local engine renders it: the model's own format (its chat
    template, or the plain transcript with its preamble) tokenized in its vocabulary. The room left
    for documents is what the prompt leaves, frame and all; counting the messages' words alone
    left out the format's own tokens, and a planned turn overflowed a small context. Built on the
    shared weights as the batch engine builds its format; no llama context is touched."""

    def __init__(self, model: LoadedModel, n_ctx: int) -> None:
        self.format, _notice = chat_format(model)
        self.llm, self.n_ctx = model.llm, n_ctx

    def prompt_tokens(self, messages: list[MessageBody]) -> list[int]:
        text = self.format.render(messages, True, None)
        fmt = self.format
        return self.llm.tokenize(text.encode("utf-8"), add_bos=fmt.add_bos, special=fmt.special)


@dataclass
class Pending:
    """An attachment read and counted, with the text it stands for: a chip above the box until it
    is sent with a question (app.ui.chat.attachment_chips)."""

    attachment: Attachment
    text: str
    page_starts: tuple[int, ...] = ()


def _estimate(text: str) -> int:
    return (len(text.encode("utf-8")) + 3) // 4


class DocTurns:
    """ChatFlow's documents; the attributes below are ChatFlow's."""

    conversation: LiveConversation
    recorder: TurnRecorder | None
    bar: MessageBar
    n_ctx: int
    count_tokens: Callable[[str], int] | None
    measure: PromptMeasure | None
    index_path: Path | None

    def document_text(self, sha256: str) -> str | None:
        """An attachment's whole text by its hash: the conversation's, else the history store's."""
        got = self._document(self.conversation, sha256)
        return got[0] if got is not None else None

    def _document(self, conv: LiveConversation, sha256: str) -> tuple[str, tuple[int, ...]] | None:
        if sha256 not in conv.documents and self.recorder is not None:
            try:
                doc = self.recorder.store.document(sha256)
            except StoreError:
                doc = None
            if doc is not None:
                conv.keep_document(sha256, doc.text, tuple(doc.page_starts))
        return conv.documents.get(sha256)

    def _plan_docs(self, conv: LiveConversation, question: str, pending: list[Pending], upto: int,
                   settings: GenerationSettings) -> DocsPlan | None:
        """The turn's prompt text with its documents (None: the question has none), the history
        being the messages before `upto`. Raises LlamaDeskError or OSError in one line when the
        index cannot be read."""
        for p in pending:
            conv.keep_document(p.attachment.sha256, p.text, tuple(p.page_starts))
        missing = [a.name for a in conv.attachments() if self._document(conv, a.sha256) is None]
        attached = conv.attached([p.attachment for p in pending])
        if not attached and not conv.collections:
            return None
        if missing:
            self.bar.show_message(f"Not given to the model: {', '.join(missing)} (its text is not stored "
                                  "with this conversation)", "warning")
        count = self.count_tokens or _estimate
        m = self.measure
        engine = m if m is not None and m.n_ctx == self.n_ctx else _Window(self.n_ctx)
        room = room_tokens(engine, conv.system(), conv.history(upto), question, settings.max_tokens, count)
        with DocsIndex.open(self.index_path) as index:
            return plan_turn(question, attached, list(conv.collections), room, count, index)

    def set_collections(self, names: list[str]) -> None:
        """The collections this conversation's next questions search, saved with it now."""
        conv = self.conversation
        conv.collections = list(names)
        if self.recorder is not None and conv.id is not None:
            self.recorder.save_collections(conv.id, list(names))


def new_documents(pending: list[Pending]) -> list[tuple[Attachment, _Doc]]:
    """A question's attachments with their texts, as TurnRecorder.begin keeps them."""
    return [(p.attachment, _Doc(p)) for p in pending]


class _Doc:
    """A pending attachment in the shape Store.put_document keeps (app.history.documents)."""

    def __init__(self, p: Pending) -> None:
        a = p.attachment
        self.sha256, self.name, self.kind, self.pages = a.sha256, a.name, a.kind, a.pages
        self.text, self.page_starts = p.text, tuple(p.page_starts)
