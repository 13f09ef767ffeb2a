"""One chat turn, answered by the engine and written to the store as it happens.

The window's engine thread and `llamadesk ask` both call `record_turn`, so a
conversation continued in either is sent to the model in the same format and
saved the same way: the user's message before generation starts, the reply
while it grows (at least once a second), and its stats and the context
budget's out-of-context markers when it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from app.chat.records import COMPLETE, INTERRUPTED
from app.chat.session import ChatEngine, Reply
from app.chat.store import Store
from app.engine.decoder import CancelToken, EventSink
from app.engine.events import Event, TextDelta
from app.engine.sampling import GenerationSettings

SAVE_EVERY_S = 0.5  # twice the promised rate: a crash loses well under a second


class ReplySaver:
    """An event sink that keeps the store's copy of a growing reply fresh.

    Progress events arrive several times a second even during a long
    prefill, so the row's heartbeat stays fresh before the first token too.
    """

    def __init__(self, store: Store, msg_id: int, every_s: float = SAVE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.store, self.msg_id, self.every_s, self.clock = store, msg_id, every_s, clock
        self.parts: list[str] = []
        self.saves = 0
        self._last = clock()

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, TextDelta):
            self.parts.append(ev.text)
        now = self.clock()
        if now - self._last >= self.every_s:
            self._last = now
            self.store.update_reply(self.msg_id, self.text)
            self.saves += 1


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
