"""One chat turn, answered by the engine and written to the store as it happens.

`llamadesk ask` calls `record_turn`: the user's message is saved before
generation starts, the reply while it grows (at least once a second), and its
stats and the context budget's out-of-context markers when it ends. The window
saves through app/ui/saving.py instead, on the GUI thread, because it also
takes turns back (regenerate, edit) and keeps its own conversation model; both
write the same rows through the same Store calls (begin/update/finish_reply).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from app.chat.errors import StoreError
from app.chat.records import COMPLETE, INTERRUPTED
from app.chat.session import ChatEngine, Reply
from app.chat.store import Store
from app.engine.decoder import CancelToken, EventSink
from app.engine.events import Event, TextDelta
from app.engine.sampling import GenerationSettings

log = logging.getLogger("llamadesk.recorder")

SAVE_EVERY_S = 0.5  # twice the promised rate: a crash loses well under a second


class ReplySaver:
    """Collects a growing reply from the events and saves it on its own timer.

    A timer rather than "on the next event": when the machine is busy a token
    can take longer than a second, and the text before it must not wait for
    it. Each tick also refreshes the row's heartbeat, so during a long
    prefill other processes still see a live writer. Use it as a context
    manager around the generation.
    """

    def __init__(self, store: Store, msg_id: int, every_s: float = SAVE_EVERY_S):
        if every_s <= 0:
            raise ValueError(f"the save interval must be positive, got {every_s}")
        self.store, self.msg_id, self.every_s = store, msg_id, every_s
        self.parts: list[str] = []
        self.saves = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, TextDelta):
            self.parts.append(ev.text)

    def save(self) -> None:
        try:
            self.store.update_reply(self.msg_id, self.text)
            self.saves += 1
        except StoreError as e:  # a full disk must not kill the reply the user is watching
            log.warning("could not save the growing reply: %s", e)

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


@dataclass
class Turn:
    conversation_id: int
    user_message_id: int
    reply_message_id: int
    reply: Reply


def record_turn(store: Store, engine: ChatEngine, conv_id: int | None, user_text: str,
                settings: GenerationSettings, system: str | None = None,
                on_event: EventSink | None = None, cancel: CancelToken | None = None,
                model: str | None = None, save_every_s: float = SAVE_EVERY_S) -> Turn:
    """Answer `user_text` in conversation `conv_id` (None: start a new one) and record it.

    `system` None keeps the conversation's system prompt; a new one replaces it.
    If generation fails before any text, the turn is rolled back (nothing is
    left behind to confuse the next turn); after some text it is kept as
    "interrupted" and the error propagates.
    """
    created = conv_id is None
    if created:
        conv_id = store.create_conversation(system_prompt=system, model=model, settings=settings.to_json())
        history, ids = [], []
    else:
        conv = store.get_conversation(conv_id)
        system = conv.system_prompt if system is None else system
        history, ids = conv.history()
        store.update_conversation(conv_id, system_prompt=system, model=model, settings=settings.to_json())
    user_id = store.add_message(conv_id, "user", user_text)
    reply_id = store.begin_reply(conv_id)
    saver = ReplySaver(store, reply_id, save_every_s)

    def sink(ev: Event) -> None:
        saver(ev)
        if on_event is not None:
            on_event(ev)

    try:
        with saver:
            reply = engine.reply(history, user_text, settings, system, sink, cancel)
    except BaseException:
        if saver.text:
            store.finish_reply(reply_id, saver.text, None, state=INTERRUPTED)
        elif created:
            store.discard_conversation(conv_id)
        else:
            store.delete_message(reply_id)
            store.delete_message(user_id)
        raise
    store.finish_reply(reply_id, reply.text, reply.stats, state=COMPLETE,
                       out_of_context=[ids[i] for i in reply.dropped])
    return Turn(conv_id, user_id, reply_id, reply)
