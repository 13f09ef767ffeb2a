"""A chat turn answered in a slot of a multi-sequence engine instead of by the chat's own engine.

While the Batch window runs a batch, or the window serves its model, a turn
typed in the chat takes a slot of that engine (the batch's reserved online
sequence, or the server's next free slot) rather than a second context
competing for the same cores. The turn must still read exactly as one the
chat's engine answered: the history fitted to the slot's context with the
same budget (so dropped turns are marked), a Reply with the dropped counts,
the Stop button honoured, and a turn stopped before it had a slot ending as a
stop, not as a failure. Both window routers forward to this one adaptor; it
knows no Qt, so its callbacks are the routers' signals.
"""

from __future__ import annotations

from collections.abc import Callable

from app.chat.budget import Fit, fit_history
from app.chat.reply import Reply
from app.engine.control import CancelToken
from app.engine.events import Event, Finished
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.slots.types import RequestDone, SlotRequest

ReplySink = Callable[[Reply], None]
FailSink = Callable[[str, bool], None]  # message, is a context overflow


class RoutedTurn:
    """One chat turn as a SlotRequest; its events and end come back through the callbacks,
    on the engine's thread. `stop(request_id)` asks the engine to stop it (the chat's Stop)."""

    def __init__(self, history: list[MessageBody], user_text: str, settings: GenerationSettings,
                 system: str | None, cancel: CancelToken, on_event: Callable[[Event], None],
                 on_reply: ReplySink, on_fail: FailSink):
        self.history, self.user_text, self.settings, self.system = history, user_text, settings, system
        self.cancel = cancel
        self._on_event, self._on_reply, self._on_fail = on_event, on_reply, on_fail
        self.fit: Fit | None = None  # set on the engine thread when the prompt is built
        self.request_id: str | None = None  # the engine's id, once submitted
        self.stop: Callable[[str], None] | None = None
        self.ended = False

    def request(self, custom_id: str = "") -> SlotRequest:
        """The slot request; its events go to `event()`."""
        return SlotRequest(custom_id, settings=self.settings, build_prompt=self._build_prompt,
                           on_event=self.event)

    def _build_prompt(self, slot_ctx: int,
                      to_tokens: Callable[[list[MessageBody]], list[int]]) -> list[int]:
        self.fit = fit_history(self.system, self.history, self.user_text, self.settings.max_tokens,
                               slot_ctx, to_tokens)
        return self.fit.tokens

    def event(self, ev) -> None:
        """Every event of the request, its RequestDone included."""
        if self.ended:
            return
        if self.cancel.is_set() and self.stop is not None and self.request_id is not None:
            self.stop(self.request_id)
        if isinstance(ev, Finished):
            self.ended = True
            fit = self.fit
            if fit is not None:
                ev.stats.dropped_messages, ev.stats.dropped_tokens = len(fit.dropped), fit.dropped_tokens
                ev.stats.reply_limit = fit.limit(self.settings.max_tokens)  # the slot clamps it the same way
            self._on_reply(Reply(ev.text, ev.stats, fit.dropped if fit else []))
        elif isinstance(ev, RequestDone):
            self.done(ev)
        else:
            self._on_event(ev)

    def done(self, ev: RequestDone) -> None:
        """The request ended without a reply: refused (too long, bad settings), or stopped
        before it had a slot, which is a stop (nothing was shown), not a failure."""
        if self.ended:
            return
        self.ended = True
        st = ev.result.stats
        if st.error is not None:
            self._on_fail(st.error, st.error_kind == "context_overflow")
        else:
            self._on_reply(Reply("", ReplyStats(
                ttft_s=None, prefill_tokens=0, cached_tokens=0, prefill_s=0.0, prefill_tok_s=None,
                decode_tokens=0, decode_s=0.0, decode_tok_s=None, total_s=st.total_s or 0.0,
                kv_used=None, n_ctx=None, stop_reason="cancelled")))

    def abandon(self, message: str) -> None:
        """The engine went away before the turn ended."""
        if not self.ended:
            self.ended = True
            self._on_fail(message, False)
