"""One slot of the engine: a request's sequence in the KV cache, its sampler and its text.

The per-token rules (EOG, stop strings, max_tokens, what counts as the first
token) are the Decoder's own TokenReader, and the clock is its TokenTimer, so a
reply is cut and measured by the same rules batched as alone.
"""

from __future__ import annotations

import itertools
import logging
from array import array
from dataclasses import replace

from app.engine.events import Finished, FirstToken, TextDelta
from app.engine.reasoning import ReasoningReply
from app.engine.sampling import GenerationSettings, Sampler
from app.engine.speculative import Speculation
from app.engine.stats import ReplyStats
from app.engine.textstream import TokenReader
from app.engine.timing import TokenTimer
from app.slots.scheduler import SlotState
from app.slots.speculation import accepted_per_pos, stats_fields
from app.slots.types import SlotRequest, SlotResult, SlotStats

log = logging.getLogger("llamadesk.batch")


class Slot:
    def __init__(self, seq: int, req: SlotRequest, prompt: list[int], settings: GenerationSettings,
                 slot_ctx: int, n_vocab: int, vocab, queued_at: float, now: float,
                 thinking: ReasoningReply | None = None, opening: str = ""):
        """`thinking`: a thinking template's reply (app.slots.thinking): its tracker is the
        Sampler's, and a "split" request's events and text go through its split."""
        self.seq = seq
        self.req = req
        self.prompt = prompt
        self.thinking = thinking
        if thinking is not None:
            settings = replace(settings, reasoning=thinking.tracker)
        split = thinking is not None and req.reasoning == "split"
        self.split = thinking if split else None
        self.sink = thinking.sink(req.on_event) if thinking is not None and split else req.on_event
        self.opening = opening
        self.settings = settings
        self.vocab = vocab
        self.sampler = Sampler(settings, n_vocab, vocab, prompt)
        self.max_new = min(settings.max_tokens, slot_ctx - len(prompt))
        self.reader = TokenReader(vocab, settings.stop, self.max_new, settings.ignore_eos,
                                  verbatim=req.verbatim)
        self.slot_ctx = slot_ctx
        self.state = SlotState.PREFILLING
        self.prefilled = 0  # prompt tokens already in the KV cache
        self.cached = 0  # of those, not evaluated for this request (kept, shared or from disk)
        self.shared = 0  # of `cached`, copied from another sequence
        self.cached_disk = 0  # of `cached`, loaded from the disk prompt cache
        # Waiting for another slot still prefilling the same prefix: (that slot, tokens to copy).
        self.follow: tuple[Slot, int] | None = None
        self.save_at: int | None = None  # the prefill stops here once, to save the prefix to disk
        self.n_past = 0  # tokens of this sequence in the KV cache
        self.fed: list[int] = []  # generated tokens decoded into the KV cache
        self.shown = False  # the first visible text went out
        self.pending: int | None = None  # DECODING: sampled, not yet decoded
        self.parts: list[str] = []
        self.stop_reason: str | None = None
        self.error: str | None = None
        self.grammar_ms: float | None = None  # set by finish()
        self.queued_at = queued_at
        self.slot_start = now
        self.first_sample: float | None = None  # the prefill ended
        self.timer = TokenTimer()
        self.stamps = array("d")  # perf_counter() of each counted token
        # When asked: each sampled token's TokenLogprob. TextDeltas carry the counted tokens'
        # (an end-of-generation token is not text); the result has them all.
        self.logprobs: list = []
        self.lp_counted = 0  # of logprobs, those of counted tokens
        self.lp_sent = 0  # of those, carried by a TextDelta
        self.spec_mode: str | None = None  # the engine's speculative mode, when it has one
        self.spec: Speculation | None = None  # made when the slot first decodes alone

    def _emit(self, ev) -> None:
        if self.sink is not None:
            try:
                self.sink(ev)
            except Exception:
                log.exception("the consumer of %s failed on %s", self.req.custom_id, type(ev).__name__)

    @property
    def generated(self) -> int:
        return self.reader.generated

    @property
    def held(self) -> list[int]:
        """The tokens this sequence holds in the KV cache now."""
        return self.prompt[:self.prefilled] + self.fed

    @property
    def to_prefill(self) -> int:
        """Prompt tokens this slot has still to evaluate (not those it waits to copy)."""
        return len(self.prompt) - max(self.prefilled, self.follow[1] if self.follow else 0)

    @property
    def waiting(self) -> bool:
        """Prefilling, but waiting for another slot to evaluate the prefix it will copy."""
        return self.follow is not None

    def take_prefix(self, n: int, shared: int = 0, disk: int = 0) -> None:
        """The sequence now holds the prompt's first `n` tokens, `shared` of them copied from
        another sequence and `disk` loaded from the prompt cache; the prefill starts after them."""
        self.prefilled = self.n_past = self.cached = n
        self.shared, self.cached_disk = shared, disk

    def accept(self, tok: int, now: float) -> bool:
        """Take one sampled token; True when the request is finished."""
        if self.first_sample is None:
            self.first_sample = now
        if self.sampler.last is not None:
            self.logprobs.append(self.sampler.last)
        counted = self.reader.generated
        delta = self.reader.accept(tok)
        if self.reader.generated > counted:
            self.timer.token(now)
            self.stamps.append(now)
            self.lp_counted = len(self.logprobs)
        if delta:
            self._text(delta, now)
        if self.reader.stop_reason is not None:
            self.stop_reason = self.reader.stop_reason
            return True
        if self.sampler.grammar is not None and self.sampler.grammar.finished:
            self.stop_reason = "stop"  # complete: the grammar allows nothing but the end
            return True
        self.pending = tok
        self.state = SlotState.DECODING
        if self.spec is not None:
            self.spec.took(tok)
        return False

    def _text(self, delta: str, now: float) -> None:
        if self.timer.text(now):
            self.shown = True
            self._emit(FirstToken(now - self.queued_at))
        if self.opening:
            delta, self.opening = self.opening + delta, ""
        self.parts.append(delta)
        fresh = tuple(self.logprobs[self.lp_sent:self.lp_counted])
        self.lp_sent = self.lp_counted
        self._emit(TextDelta(delta, self.generated, now, fresh))

    def finish(self, now: float, t0: float, stop_reason: str | None = None,
               error: str | None = None, kind: str | None = None) -> SlotResult:
        """End the request; stamps in the result are relative to the engine's t0. `kind`: the
        error's, when it is the request's own fault (a constraint that broke down)."""
        self.state = SlotState.FINISHED
        if stop_reason:
            self.stop_reason = stop_reason
        self.error = error or self.error
        if self.error:
            self.stop_reason = "error"
        tail = self.reader.finish()
        if tail:
            self._text(tail, now)
        grammar = self.sampler.grammar
        self.grammar_ms = grammar.ms_per_token() if grammar is not None else None
        self.sampler.close()
        text = "".join(self.parts)
        st = SlotStats(
            prompt_tokens=len(self.prompt), completion_tokens=self.generated, cached_tokens=self.cached,
            shared_tokens=self.shared, cached_disk_tokens=self.cached_disk,
            stop_reason=self.stop_reason or "stop", slot=self.seq, online=self.req.online,
            queued_at=self.queued_at - t0, slot_start=self.slot_start - t0,
            first_token_at=self.timer.ttft_from(t0), finished_at=now - t0,
            ttft_from_queue_s=self.timer.ttft_from(self.queued_at),
            ttft_from_slot_s=self.timer.ttft_from(self.slot_start),
            queue_wait_s=self.slot_start - self.queued_at, total_s=now - self.queued_at,
            decode_tok_s=self.timer.wall_rate(self.generated), error=self.error,
            error_kind=(kind or "generation_failed") if self.error else None,
            grammar_ms_per_token=self.grammar_ms,
            **stats_fields(self.spec_mode, self.spec), draft_accepted_per_pos=accepted_per_pos(self.spec),
        )
        reasoning = ""
        if self.sink is not None:
            rs = self.reply_stats(st, now)
            self._emit(Finished(text, rs))
            if self.split is not None:  # its Finished ended the split: the answer and the count
                text, reasoning = self.split.answer, self.split.reasoning
                st.reasoning_tokens = rs.reasoning_tokens
        gaps = [b - a for a, b in itertools.pairwise(self.stamps)]
        return SlotResult(self.req.custom_id, text, st, self.req.line, self.req.reply_as, gaps,
                          tuple(self.logprobs), reasoning)

    def reply_stats(self, st: SlotStats, now: float) -> ReplyStats:
        """The chat gauges' record. Batched compute is shared, so these are wall times."""
        pre_s = (self.first_sample or now) - self.slot_start
        return ReplyStats(
            ttft_s=st.ttft_from_queue_s, prefill_tokens=len(self.prompt) - self.cached,
            cached_tokens=self.cached, cached_disk_tokens=self.cached_disk, prefill_s=pre_s,
            prefill_tok_s=(len(self.prompt) - self.cached) / pre_s if pre_s > 0 else None,
            decode_tokens=self.generated, decode_s=self.timer.decode_s, decode_tok_s=st.decode_tok_s,
            total_s=st.total_s or 0.0, kv_used=self.n_past, n_ctx=self.slot_ctx,
            stop_reason=st.stop_reason, prompt_tokens=len(self.prompt),
            wall_decode_tok_s=st.decode_tok_s, error=st.error, grammar_ms_per_token=self.grammar_ms,
            **stats_fields(self.spec_mode, self.spec), plain_tok_s=self._plain_rate(st.decode_tok_s),
        )

    def _plain_rate(self, rate: float | None) -> float | None:
        """The decode rate without speculation, from the measured cost of plain alone steps."""
        speedup = self.spec.pacer.speedup() if self.spec is not None else None
        return rate / speedup if rate and speedup else None
