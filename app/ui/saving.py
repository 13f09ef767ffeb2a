"""Saving the window's conversation into the shared SQLite store as it happens.

The store is safe to call from any thread and each write is one short
transaction, so the window writes from the GUI thread: the question when it is
sent, the growing reply from a 0.5 s timer (a crash loses at most that much,
and the timer doubles as the row's heartbeat), the sealed reply at its end,
and exchanges taken back. Never per token.
A store that fails (disk full, locked for too long) must not stop the chat, so
errors are reported once through `on_error` and the conversation goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.chat.errors import StoreError
from app.chat.records import INTERRUPTED
from app.chat.conversation import ChatMessage, Conversation

log = logging.getLogger("llamadesk.ui.saving")


class ConversationSaver:
    def __init__(self, store, model: Callable[[], str | None] = lambda: None,
                 on_error: Callable[[str], None] = lambda _m: None):
        self.store = store
        self._model = model
        self._on_error = on_error
        self._failed = False

    def _guard(self, what: str, fn):
        try:
            return fn()
        except (StoreError, OSError, ValueError) as e:
            log.warning("could not %s: %s", what, e)
            if not self._failed:
                self._failed = True
                self._on_error(f"Conversation history is not being saved ({what}: {e}).")
            return None

    def question_sent(self, conv: Conversation, msg: ChatMessage) -> None:
        def save():
            if conv.id is None:
                conv.id = self.store.create_conversation(system_prompt=conv.system(), model=self._model())
            else:
                self.store.update_conversation(conv.id, system_prompt=conv.system_prompt,
                                               model=self._model())
            msg.id = self.store.add_message(conv.id, "user", msg.content)
        self._guard("save the question", save)

    def reply_started(self, conv: Conversation) -> int | None:
        """The reply's row, in state "generating", before its first token."""
        if conv.id is None:
            return None
        return self._guard("save the reply", lambda: self.store.begin_reply(conv.id))

    def reply_progress(self, reply_id: int | None, text: str) -> None:
        if reply_id is not None:
            self._guard("save the reply", lambda: self.store.update_reply(reply_id, text))

    def reply_finished(self, conv: Conversation, msg: ChatMessage, reply_id: int | None) -> None:
        if conv.id is None:
            return
        def save():
            ooc = [m.id for m in conv.messages if m.out_of_context and m.id is not None]
            if reply_id is None:  # begin_reply failed; try once more as a whole message
                msg.id = self.store.add_message(conv.id, "assistant", msg.content, stats=msg.stats)
                self.store.set_out_of_context(conv.id, ooc)
            else:
                self.store.finish_reply(reply_id, msg.content, msg.stats, out_of_context=ooc)
                msg.id = reply_id
        self._guard("save the reply", save)

    def reply_cut(self, reply_id: int | None, text: str) -> None:
        """The window left the reply (switched, closed): keep what it said, marked."""
        if reply_id is None:
            return
        if text:
            self._guard("save the reply", lambda: self.store.finish_reply(
                reply_id, text, None, state=INTERRUPTED))
        else:
            self.reply_failed(reply_id)

    def reply_failed(self, reply_id: int | None) -> None:
        if reply_id is not None:
            self._guard("remove the reply", lambda: self.store.delete_message(reply_id))

    def removed(self, messages: list[ChatMessage]) -> None:
        def delete():
            for m in messages:
                if m.id is not None:
                    self.store.delete_message(m.id)
        self._guard("remove messages", delete)
