"""One reply as the decode loop's phases see it, and llama.cpp's own counters read by phase.

Kept apart from app.engine.decoder so the loop's file holds the loop; the
speculative path (app.engine.speculative) fills the same Turn.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import llama_cpp

from app.engine.control import CancelToken, EventSink
from app.engine.events import Event, FirstToken, Progress, SpecProgress, TextDelta
from app.engine.grammar import GrammarMatcher
from app.engine.logprobs import TokenLogprob
from app.engine.speculative import Speculation
from app.engine.timing import TokenTimer

PROGRESS_EVERY_S = 0.2  # the gauges promise at least 4 updates a second


@dataclass
class Turn:
    """One generate() call as its phases see it; the prefill abort callback reads it too."""

    prompt: list[int]
    cached: int  # prompt tokens reused from the KV cache
    cancel: CancelToken | None
    sink: EventSink | None  # the caller's on_event; None: nobody listens
    t_submit: float  # generate() was called
    cached_disk: int = 0  # of cached, loaded from the prompt cache on disk
    save_at: int = 0  # save the state to disk when the cache holds this many prompt tokens (0: never)
    t_pre: float = 0.0  # the prefill began
    last_progress: float = 0.0  # the last Progress event went out
    stop_reason: str | None = None
    error: str | None = None
    grammar_ms: float | None = None  # per token, when a constraint was kept to
    grammar_setup_s: float | None = None  # the constraint's setup, before the prefill
    timer: TokenTimer = field(default_factory=TokenTimer)
    parts: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)  # when asked
    unsent: int = 0  # of logprobs, how many no TextDelta has carried yet
    spec: Speculation | None = None  # when the reply speculates
    decoded: int = 0  # tokens sampled from decode steps' logits (the prefill's first excluded)

    def emit(self, ev: Event) -> None:
        if self.sink is not None:
            self.sink(ev)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def show(self, text: str, generated: int, now: float) -> None:
        """Text became visible: FirstToken the first time, then the delta."""
        if self.timer.text(now):
            self.emit(FirstToken(now - self.t_submit))
        self.parts.append(text)
        fresh = tuple(self.logprobs[len(self.logprobs) - self.unsent:]) if self.unsent else ()
        self.unsent = 0
        self.emit(TextDelta(text, generated, now, fresh))



class Perf:
    """llama.cpp's own counters, read as (tokens, seconds) for both kinds of eval.

    llama.cpp files a 1-token batch under "eval" even when it is the tail of a
    prompt after a prefix hit, so we attribute by phase (snapshots around the
    prefill) rather than by llama.cpp's p_eval/eval split.
    """

    def __init__(self, ctx):
        self.ctx = ctx

    def snapshot(self) -> tuple[int, float]:
        llama_cpp.llama_synchronize(self.ctx)
        d = llama_cpp.llama_perf_context(self.ctx)
        # llama.cpp reports max(1, n) so callers never divide by zero; a zero
        # time tells us the count was really 0.
        n_p = d.n_p_eval if d.t_p_eval_ms > 0 else 0
        n_e = d.n_eval if d.t_eval_ms > 0 else 0
        return n_p + n_e, (d.t_p_eval_ms + d.t_eval_ms) / 1000.0


class Live:
    """The gauges' view of a decode: a rolling rate, and a Progress every PROGRESS_EVERY_S."""

    def __init__(self, turn: Turn, prefilled: int, grammar: GrammarMatcher | None = None):
        self.turn, self.prefilled, self.grammar = turn, prefilled, grammar
        self.recent: deque[float] = deque(maxlen=16)
        self.last = time.perf_counter()

    def progress(self, now: float, generated: int, kv_used: int, n_ctx: int) -> None:
        if now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        r = self.recent
        rate = (len(r) - 1) / (r[-1] - r[0]) if len(r) > 1 and r[-1] > r[0] else None
        spec = self.turn.spec
        shown = None
        if spec is not None:
            p = spec.pacer
            speedup = p.speedup()
            shown = SpecProgress(spec.mode, p.drafted, p.accepted, p.checks, speedup,
                                 rate / speedup if rate and speedup else None, p.stepped_aside)
        grammar_ms = self.grammar.ms_per_token() if self.grammar is not None else None
        self.turn.emit(Progress("decode", now - self.turn.t_submit, self.prefilled, generated, rate,
                                kv_used, n_ctx, shown, grammar_ms))
