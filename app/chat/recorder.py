"""Recording chat turns in the store: the one policy the window and `llamadesk ask` share.

Both front ends record a turn through TurnRecorder, so a conversation saved by
either reads the same: the question is saved before generation starts, the
growing reply at least every SAVE_EVERY_S (a crash loses at most that much),
the sampling settings and the model's identity with the conversation, and the
stats with the reply. A thinking model's reasoning is saved beside the text,
apart from it, in the same writes. Whatever was shown to the user is kept: a
reply that failed or was left after some text (or some reasoning: the
thinking was on screen) is sealed "interrupted" with it. A turn that failed
before any of either is rolled back, because nothing of it was shown (the
window puts the question back in the message box).

The store is safe from any thread, and each call here is one short
transaction, so the window records from its GUI thread and the CLI from its
worker thread. Never imports Qt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.chat.doc_prompt import DocsPlan
from app.chat.engines import ReplyEngine
from app.chat.reply import Reply
from app.chat.reply_format import reply_kind
from app.engine.control import CancelToken, EventSink
from app.engine.events import Event, ReasoningDelta, TextDelta
from app.engine.message import Attachment, DocsUse, MessageBody, ToolCall
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.history import tree
from app.history.documents import DocumentLike
from app.history.errors import StoreError
from app.history.messages import AT_LEAF
from app.history.records import COMPLETE, INTERRUPTED
from app.history.store import Store
from app.openai_compat.tools import ToolCalls

log = logging.getLogger("llamadesk.recorder")

SAVE_EVERY_S = 0.5  # twice the promised rate: a crash loses well under a second

ErrorSink = Callable[[str], None]
# A question's new attachment and its extracted text (app.docs.extract.Extracted), to keep.
NewAttachment = tuple[Attachment, DocumentLike]
COLLECTIONS = "collections"  # the settings key of a conversation's chosen collections


@dataclass
class Turn:
    """The store rows of one turn while it is recorded."""

    conversation_id: int
    user_message_id: int | None  # None: a reply that continues after tool results
    reply_message_id: int
    history_ids: Sequence[int | None]  # the store id of each history message sent with the turn
    created: bool  # the conversation was created by this turn
    reply: Reply | None = None
    state: str | None = None  # how the reply was sealed; None: rolled back (nothing was shown)


def reply_state(stats: ReplyStats | None) -> str:
    """A reply that ended in an error is kept as what it is: cut off."""
    return INTERRUPTED if stats is None or stats.error is not None else COMPLETE


class TurnRecorder:
    """Writes turns to one store. `on_error` None: store errors raise (the CLI
    reports them and stops); otherwise each is reported once through it and the
    chat goes on unsaved (the window). A failed save of the growing reply is
    only logged either way: a full disk must not stop the reply being watched.
    """

    def __init__(self, store: Store, on_error: ErrorSink | None = None):
        self.store = store
        self.model: dict | None = None  # LocalChatEngine.identity() of the model answering
        self._on_error = on_error
        self._reported = False

    def _guard(self, what: str, fn):
        if self._on_error is None:
            return fn()
        try:
            return fn()
        except (StoreError, OSError, ValueError) as e:
            log.warning("could not %s: %s", what, e)
            if not self._reported:
                self._reported = True
                self._on_error(f"Conversation history is not being saved ({what}: {e}).")
            return None

    def _conversation_fields(self, system: str | None, settings: GenerationSettings,
                             collections: Sequence[str] | None = None) -> dict:
        meta = settings.to_json()
        if self.model is not None:
            meta["model"] = self.model
        if collections:
            meta[COLLECTIONS] = list(collections)
        return {"system_prompt": system, "settings": meta,
                "model": self.model["file"] if self.model else None}

    def begin(self, conv_id: int | None, user_text: str, system: str | None,
              settings: GenerationSettings, history_ids: Sequence[int | None] = (),
              reply_format: dict | None = None, tools: dict | None = None,
              parent_id: int | None = AT_LEAF, attachments: Sequence[NewAttachment] = (),
              collections: Sequence[str] | None = None) -> Turn | None:
        """Save the question and an empty reply row ("generating") before generation starts; the
        row is marked JSON when the settings hold the reply to JSON. `reply_format` (the window's
        ReplyFormat.to_json) and `tools` (ToolSet.to_json) are saved with the conversation; None
        leaves the stored one. The question follows `parent_id` (AT_LEAF: the path shown): an
        edited question follows what the one it replaces followed, which stays as a branch.
        `attachments` are the question's documents (their texts kept first: once per hash, they
        harm nothing if the question then fails); `collections` the conversation's chosen ones."""
        def save() -> Turn:  # one transaction: a failure leaves no conversation without its question
            for _, doc in attachments:
                self.store.put_document(doc)
            fields = self._conversation_fields(system, settings, collections)
            cid, user_id, reply_id = self.store.begin_turn(conv_id, user_text, **fields,
                                                           reply_format=reply_format,
                                                           reply_as=reply_kind(settings.constraint),
                                                           tools=tools, parent_id=parent_id)
            if attachments:
                self.store.set_attachments(user_id, [a for a, _ in attachments])
            return Turn(cid, user_id, reply_id, list(history_ids), conv_id is None)
        return self._guard("save the question", save)

    def begin_regeneration(self, conv_id: int, question_id: int,
                           history_ids: Sequence[int | None]) -> Turn | None:
        """An empty reply row after `question_id`, beside its earlier replies, which stay."""
        return self._guard("save the reply", lambda: Turn(
            conv_id, None, self.store.begin_reply(conv_id, parent_id=question_id), list(history_ids), False))

    def begin_continuation(self, conv_id: int, history_ids: Sequence[int | None]) -> Turn | None:
        """An empty reply row for the model's answer after tool results (no question of its own)."""
        return self._guard("save the reply", lambda: Turn(conv_id, None, self.store.begin_reply(conv_id),
                                                          list(history_ids), False))

    def tool_result(self, conv_id: int | None, call: ToolCall, result: str,
                    server: str | None = None) -> int | None:
        """A call's result, as a tool message after the reply that made the call (`server`: the
        MCP server that answered it)."""
        if conv_id is None:
            return None
        return self._guard("save the tool's result", lambda: self.store.add_message(
            conv_id, "tool", result, tool_call_id=call.id, tool_name=call.name, tool_server=server))

    def progress(self, turn: Turn | None, text: str, reasoning: str | None = None) -> None:
        """Save the growing reply; `reasoning` None leaves the saved reasoning as it was."""
        if turn is None:
            return
        try:
            self.store.update_reply(turn.reply_message_id, text, reasoning)
        except StoreError as e:
            log.warning("could not save the growing reply: %s", e)

    def finish(self, turn: Turn | None, reply: Reply, docs: DocsUse | None = None) -> str | None:
        """Seal the reply with its stats and out-of-context markers; returns its state.

        A reply that ended in an engine error keeps its text as interrupted; one
        stopped or failed before any text or reasoning is rolled back like any
        turn that showed nothing (a model's own empty answer is kept: that is
        its reply). Its reasoning is the reply's; a reply without any keeps what
        was saved while it streamed (an engine that does not collect it). `docs`: the
        documents it was given, kept with it.
        """
        if turn is None:
            return None
        turn.reply = reply
        state = reply_state(reply.stats)
        shown = reply.text or reply.tool_calls or reply.reasoning
        if not shown and (state == INTERRUPTED or reply.stats.stop_reason == "cancelled"):
            self.abandon(turn, "")  # stopped or failed before any text: nothing was shown
            return None
        ooc = [turn.history_ids[i] for i in reply.dropped
               if i < len(turn.history_ids) and turn.history_ids[i] is not None]
        self._guard("save the reply", lambda: self.store.finish_reply(
            turn.reply_message_id, reply.text, reply.stats, state=state, out_of_context=ooc,
            tool_calls=reply.tool_calls, fmt=reply.format, reasoning=reply.reasoning or None))
        self._save_docs(turn, docs)
        turn.state = state
        return state

    def _save_docs(self, turn: Turn, docs: DocsUse | None) -> None:
        if docs is not None:
            self._guard("save the reply's sources", lambda: self.store.set_docs(turn.reply_message_id, docs))

    def abandon(self, turn: Turn | None, text: str, keep_question: bool = False,
                stats: ReplyStats | None = None, reasoning: str | None = None,
                docs: DocsUse | None = None) -> bool:
        """The turn ended without a normal finish (an exception, the user left it).

        With text or reasoning, the reply is kept, marked interrupted (True);
        `reasoning` None keeps what was saved while it streamed. Without, it is
        removed, and the question too unless `keep_question`: the user left it
        on screen and moved on (False).
        """
        if turn is None:
            return False
        if text or reasoning:
            self._guard("save the reply", lambda: self.store.finish_reply(
                turn.reply_message_id, text, stats, state=INTERRUPTED, reasoning=reasoning))
            self._save_docs(turn, docs)
            turn.state = INTERRUPTED
            return True

        def rollback() -> None:
            if turn.created and not keep_question:
                self.store.discard_conversation(turn.conversation_id)
                return
            self.store.delete_message(turn.reply_message_id)
            if not keep_question and turn.user_message_id is not None:
                self.store.delete_message(turn.user_message_id)
        self._guard("remove the reply", rollback)
        return False

    def save_reply_format(self, conv_id: int, reply_format: dict) -> None:
        """The format chosen between turns, saved at once (the next turn would save it too late for
        a conversation reopened before it)."""
        self._guard("save the reply format", lambda: self.store.set_reply_format(conv_id, reply_format))

    def save_tools(self, conv_id: int, tools: dict | None) -> None:
        """The tools chosen between turns, saved at once, as the reply format is."""
        self._guard("save the tools", lambda: self.store.set_tools(conv_id, tools))

    def save_collections(self, conv_id: int, names: Sequence[str]) -> None:
        """The collections chosen between turns, saved at once in the conversation's settings."""
        def save() -> None:
            settings = dict(self.store.get_conversation(conv_id).settings)
            if names:
                settings[COLLECTIONS] = list(names)
            else:
                settings.pop(COLLECTIONS, None)
            self.store.update_conversation(conv_id, settings=settings)
        self._guard("save the collections", save)



class ReplySaver:
    """Collects a growing reply from the events and saves it on its own timer.

    A timer rather than "on the next event": when the machine is busy a token
    can take longer than a second, and the text before it must not wait for
    it. Each tick also refreshes the row's heartbeat, so during a long
    prefill other processes still see a live writer. The window does the same
    with a Qt timer at the same interval.
    """

    def __init__(self, recorder: TurnRecorder, turn: Turn, every_s: float = SAVE_EVERY_S):
        if every_s <= 0:
            raise ValueError(f"the save interval must be positive, got {every_s}")
        self.recorder, self.turn, self.every_s = recorder, turn, every_s
        self.parts: list[str] = []
        self.thought: list[str] = []  # the reasoning, apart from the answer's parts
        self.saves = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.thought)

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, TextDelta):
            self.parts.append(ev.text)
        elif isinstance(ev, ReasoningDelta):
            self.thought.append(ev.text)

    def save(self) -> None:
        self.recorder.progress(self.turn, self.text, self.reasoning)
        self.saves += 1

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.save()

    def __enter__(self) -> ReplySaver:
        self._thread = threading.Thread(target=self._run, name="llamadesk-reply-saver", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def record_turn(recorder: TurnRecorder, engine: ReplyEngine, conv_id: int | None, user_text: str | None,
                settings: GenerationSettings, system: str | None = None,
                on_event: EventSink | None = None, cancel: CancelToken | None = None,
                save_every_s: float = SAVE_EVERY_S, tools: ToolCalls | None = None,
                tool_set: dict | None = None, parent_id: int | None = AT_LEAF,
                docs: DocsPlan | None = None, attachments: Sequence[NewAttachment] = (),
                collections: Sequence[str] | None = None) -> Turn:
    """Answer `user_text` in conversation `conv_id` (None: start a new one) and record it.

    `system` None keeps the conversation's system prompt; a new one replaces it. `user_text`
    None continues conversation `conv_id` after its tool results. `tools` are what the reply
    may call; `tool_set` (ToolSet.to_json) is saved with the conversation. `parent_id` (not
    AT_LEAF: the path shown) branches: the question follows that message, with the path up to it
    as its history (`ask --from`). `docs` (app.chat.documents.plan_turn) is what the engine is
    given instead of `user_text`, which alone is saved as the question, with its new
    `attachments`; the reply keeps `docs.use`. `collections` None keeps the conversation's.
    An exception after some text keeps that text (interrupted) and propagates.
    """
    store = recorder.store
    history: list[MessageBody] = []
    ids: list[int] = []
    if conv_id is not None:
        conv = store.get_conversation(conv_id)
        system = conv.system_prompt if system is None else system
        if parent_id != AT_LEAF:
            conv.messages = tree.path_to(conv.tree, parent_id) if parent_id is not None else []
        history, ids = conv.history()
        if collections is None:
            collections = conv.settings.get(COLLECTIONS) or None
    recorder.model = engine.identity()
    if user_text is None:
        if conv_id is None:
            raise ValueError("a reply after tool results continues a conversation")
        turn = recorder.begin_continuation(conv_id, ids)
    else:
        turn = recorder.begin(conv_id, user_text, system, settings, ids, tools=tool_set, parent_id=parent_id,
                              attachments=attachments, collections=collections)
    use = docs.use if docs is not None and user_text is not None else None
    prompt = docs.user_text if use is not None and docs is not None else user_text
    saver = ReplySaver(recorder, turn, save_every_s)

    def sink(ev: Event) -> None:
        saver(ev)
        if on_event is not None:
            on_event(ev)

    try:
        with saver:
            reply = engine.reply(history, prompt, settings, system, sink, cancel, tools)
    except BaseException:
        recorder.abandon(turn, saver.text, reasoning=saver.reasoning, docs=use)
        raise
    recorder.finish(turn, reply, use)
    return turn
