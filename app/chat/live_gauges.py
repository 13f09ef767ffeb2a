"""What the gauges show, computed from engine events (no Qt).

The panel asks for a snapshot on its own timer, so TTFT keeps counting while
nothing arrives (the wait is the number users care about), and the display
rate never depends on how often the engine happens to send events. TTFT and
decode rate are kept apart on purpose: averaging them into one "latency"
hides which of prefill or decode is the problem.

A finished reply's figures are its ReplyStats', carried in the snapshot for
the panel to format with the footer's own methods, and the KV count is the
engine's (ReplyStats.kv_used; live, what the engine has fed): the last token sampled
is never fed back, so counting prompt plus generated tokens reads one more
than the cache holds. The timeline belongs to the conversation shown: New
chat empties it, opening one rebuilds it from the stored stats.

The decode is held against both roofs (app.engine.utilization): memory and
compute, each utilization and which binds. The last local decode's figures are
kept for the process (last_decode), so the settings' hardware section can show
them without measuring anything on the GUI thread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from app.engine.events import (
    Finished,
    FirstToken,
    PrefillStarted,
    Preparing,
    Progress,
    ReasoningDelta,
    SpecProgress,
    TextDelta,
)
from app.engine.stats import ReplyStats
from app.engine.utilization import Limits


@dataclass(frozen=True)
class MeasuredDecode:
    """A finished local reply's decode: its rate, the position it ran at, the model's Limits."""

    limits: Limits
    position: int
    tok_s: float


_last_decode: MeasuredDecode | None = None


def last_decode() -> MeasuredDecode | None:
    """This process's last local decode with a rate (None: none yet)."""
    return _last_decode


def _keep(decode: MeasuredDecode) -> None:
    global _last_decode
    _last_decode = decode


RATE_WINDOW_S = 1.0  # rolling decode rate over the last second of tokens
MIN_RATE_SPAN_S = 0.05  # a rate over less text than this is the engine's, not the deltas'


def prompt_words(done: int, total: int, tok_s: float | None) -> str:
    """'768/1500 prompt tok · about 4 s to go': the prompt's own tokens to read (what the cache
    does not hold), how many the engine has read, and at its running rate how long the rest
    takes; the waiting line and the gauges' status both say it so."""
    left = f" · about {(total - done) / tok_s:.0f} s to go" if tok_s and done < total else ""
    return f"{done}/{total} prompt tok{left}"


@dataclass(frozen=True)
class Turn:
    """One finished reply on a time axis, from Send: what the user waited for, and why.

    `wait_s` is the time before the prompt's evaluation began (tokenizing, a busy
    engine, a server's queue); `prefill_s` reads the prompt (a cached prefix costs
    nothing, which is why `cached` is drawn beside it); then the decode."""

    wait_s: float
    prefill_s: float
    decode_s: float
    cached: int
    prefill_tokens: int
    decode_tokens: int
    ttft_s: float | None
    decode_tok_s: float | None
    live: bool = False  # the reply in progress, drawn as far as it has got
    reply_total_s: float | None = None  # the record's total, which the footer shows too
    setup_s: float = 0.0  # of wait_s, from Send: the constraint's setup (the record's grammar_setup_s)
    reasoning_tokens: int = 0  # of decode_tokens, those a thinking model spent before its answer
    ttfa_s: float | None = None  # its first answer token, from Send (None: no reasoning came first)

    @property
    def total_s(self) -> float:
        if self.reply_total_s is not None:
            return self.reply_total_s
        return self.wait_s + self.prefill_s + self.decode_s


def turn_from(stats: ReplyStats, prefill_began: float | None) -> Turn:
    """`prefill_began`: seconds after Send that the engine said prefill started (None: it did
    not say, as a server does not); else the engine's prefill time sets the split. A reply
    with no text (stopped before its first token) has no decode: its time is the wait and
    the prompt's reading."""
    ttft = stats.ttft_s
    end = ttft if ttft is not None else stats.total_s
    if prefill_began is not None:
        wait = min(max(prefill_began, 0.0), end)
        prefill = end - wait
    elif ttft is None and stats.prefill_s is None:
        wait, prefill = end, 0.0
    else:
        prefill = min(stats.prefill_s or 0.0, end)
        wait = end - prefill
    decode = max(stats.total_s - ttft, 0.0) if ttft is not None else 0.0
    return Turn(wait, prefill, decode, stats.cached_tokens or 0, stats.prefill_tokens or 0,
                stats.decode_tokens or 0, ttft, stats.decode_tok_s or stats.wall_decode_tok_s,
                reply_total_s=stats.total_s, setup_s=min(stats.grammar_setup_s or 0.0, wait),
                reasoning_tokens=stats.reasoning_tokens or 0, ttfa_s=stats.ttfa_s)


@dataclass
class Snapshot:
    active: bool
    phase: str  # "idle", "waiting", "prefill", "decode", "done"
    ttft_s: float | None  # live: elapsed while waiting; fixed once the first token came
    ttft_final: bool
    elapsed_s: float
    rate_tok_s: float | None  # live rolling decode rate
    prefill_tok_s: float | None  # final, from llama.cpp's counters
    decode_tok_s: float | None  # final
    generated: int
    max_tokens: int
    remaining_s: float | None  # at the current rate, to max_tokens
    n_ctx: int
    kv_cached: int
    kv_new: int  # prompt tokens prefilled for this reply (so far)
    kv_new_total: int
    kv_generated: int  # of the generated tokens, those in the KV cache
    dropped_tokens: int
    dropped_messages: int
    rate_series: list[tuple[float, float]]  # (seconds since first token, tok/s)
    turns: list[Turn]  # this conversation's finished replies, oldest first, then the live one
    recent_ttft: list[float]
    kv_cached_disk: int = 0  # of kv_cached, loaded from the prompt cache on disk
    source: str | None = None  # the server that answered (None: this process's llama.cpp)
    wall_decode_tok_s: float | None = None  # final: the rate the reply arrived at
    bw_gbs: float | None = None  # memory read rate the decode achieves (live, then final)
    bw_utilization: float | None = None  # of the machine's peak
    ceiling_tok_s: float | None = None  # peak / bytes a step reads: the fastest decode possible here
    bw_source: str | None = None  # where the peak comes from
    peak_gbs: float | None = None
    prefill_gflop_s: float | None = None  # 2 x parameters x prompt tokens / prefill time (the last)
    compute_utilization: float | None = None  # of the kernels' probed MAC rate (None: not measured)
    binds: str | None = None  # "memory" or "compute": the lower roof (None: no roofs)
    memory_ceiling_tok_s: float | None = None
    compute_ceiling_tok_s: float | None = None  # None: no compute peak measured on this machine yet
    stats: ReplyStats | None = None  # the finished reply's: its figures are formatted from it
    streaming: bool = True  # off: the text was shown only when the reply ended
    kv_used: int = 0  # cells of the KV cache in use: the engine's count
    spec: SpecProgress | None = None  # live, while the decode speculates (then: stats.speculation)
    # The reply is kept to a constraint: its cost per token so far (None until measured), live;
    # after, the record's (stats.grammar_ms_per_token).
    constrained: bool = False
    grammar_ms: float | None = None
    prompt_tok_s: float | None = None  # live, while the prompt is read: its running rate
    preparing: str | None = None  # live, while the wait is spent on it (Preparing.what)
    # A thinking model's reply: the tokens of reasoning so far (then the record's), whether it is
    # thinking now, and its first answer token from Send (live until the record's).
    reasoning_tokens: int = 0
    thinking: bool = False
    ttfa_s: float | None = None
    think_budget: int | None = None  # live: the reply's thinking budget, whose fill is shown

    @property
    def started(self) -> bool:
        """A reply ran (or runs) in this conversation: before, there is nothing to draw."""
        return self.active or self.stats is not None or bool(self.turns)


@dataclass
class LiveGauges:
    n_ctx: int = 0
    max_tokens: int = 0
    active: bool = False
    phase: str = "idle"
    t_submit: float = 0.0
    t_end: float = 0.0
    ttft: float | None = None
    t_first: float | None = None
    t_prefill: float | None = None
    generated: int = 0
    cached: int = 0
    cached_disk: int = 0
    new_total: int = 0
    new_done: int = 0
    progress_rate: float | None = None
    prompt_rate: float | None = None  # the prefill's running rate (its Progress)
    spec: SpecProgress | None = None
    constrained: bool = False  # the reply being decoded is kept to a constraint
    grammar_ms: float | None = None  # its cost per token so far (Progress)
    preparing: str | None = None  # what the wait is spent on (Preparing), until the prefill
    setup_s: float = 0.0  # of the live reply's wait, the setup Preparing announced
    reasoning_tokens: int = 0  # generated when the last reasoning text came
    think_budget: int | None = None  # the live reply's thinking budget (None: none)
    t_answer: float | None = None  # the first answer text after reasoning
    stats: ReplyStats | None = None
    kv_used: int = 0
    streaming: bool = True
    deltas: deque = field(default_factory=lambda: deque(maxlen=512))
    series: list[tuple[float, float]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)  # this conversation's, numbered from #1
    limits: Limits | None = None  # of the loaded model, if it has one
    gflop_s: float | None = None  # the last local prefill's arithmetic rate
    _last_sample: float = 0.0

    def start(self, now: float, max_tokens: int, n_ctx: int, streaming: bool = True,
              constrained: bool = False, think_budget: int | None = None) -> None:
        """A reply was sent; `constrained`: it is kept to a schema or grammar, so the panel keeps
        the grammar's line from the start (its figure comes with the decode's first Progress);
        `think_budget`: a thinking model's budget, whose fill the status shows while it thinks."""
        self.think_budget = think_budget
        self.constrained, self.grammar_ms = constrained, None
        self.active, self.phase = True, "waiting"
        self.t_submit, self.max_tokens, self.n_ctx, self.streaming = now, max_tokens, n_ctx, streaming
        self.ttft = self.t_first = self.t_prefill = None
        self.generated = self.cached = self.cached_disk = self.new_total = self.new_done = self.kv_used = 0
        self.progress_rate = self.prompt_rate = None
        self.spec = self.preparing = self.t_answer = None
        self.setup_s = 0.0
        self.reasoning_tokens = 0
        self.stats = None
        self.deltas.clear()
        self.series = []
        self._last_sample = 0.0

    def new_conversation(self, replies: list[ReplyStats] | None = None) -> None:
        """The conversation shown changed: the timeline is its replies (from their stored stats,
        whose engine did not say when prefill began), the last reply's figures go."""
        self.turns = [turn_from(st, None) for st in replies or ()]
        self._idle()

    def new_model(self, n_ctx: int) -> None:
        """A model was (re)loaded: its context is empty and `n_ctx` long; the last reply's figures
        were the old context's. The conversation's timeline stays."""
        self.n_ctx = n_ctx
        self._idle()

    def _idle(self) -> None:
        self.active, self.phase, self.stats = False, "idle", None
        self.t_submit = self.t_end = 0.0
        self.ttft = self.t_first = self.t_prefill = None
        self.generated = self.cached = self.cached_disk = self.new_total = self.new_done = self.kv_used = 0
        self.series = []
        self.deltas.clear()

    def feed(self, ev, now: float) -> None:
        if isinstance(ev, Preparing):
            self.preparing = ev.what
        elif isinstance(ev, PrefillStarted):
            if self.preparing is not None:  # the record's exact figure replaces it at the end
                self.setup_s = now - self.t_submit
            self.phase, self.t_prefill, self.preparing = "prefill", now, None
            self.cached, self.new_total, self.n_ctx = ev.cached_tokens, ev.new_tokens, ev.n_ctx
            self.cached_disk = ev.cached_disk_tokens
            if ev.reply_budget:  # the context may leave the reply less room than max tokens
                self.max_tokens = ev.reply_budget
        elif isinstance(ev, Progress):
            if ev.phase == "prefill":
                self.new_done = max(self.new_done, ev.prefill_done)
                self.prompt_rate = ev.rate_tok_s
            else:
                self.new_done = self.new_total
                self.progress_rate = ev.rate_tok_s
                self.spec = ev.spec
                self.grammar_ms = ev.grammar_ms if ev.grammar_ms is not None else self.grammar_ms
                self.generated = max(self.generated, ev.generated)
        elif isinstance(ev, FirstToken):
            self.ttft, self.t_first, self.phase = ev.ttft_s, now, "decode"
            self.new_done = self.new_total
        elif isinstance(ev, ReasoningDelta):
            self.generated = self.reasoning_tokens = ev.generated
            self.deltas.append((ev.t, ev.generated))
        elif isinstance(ev, TextDelta):
            if self.reasoning_tokens and self.t_answer is None:
                self.t_answer = ev.t
            self.generated = ev.generated
            self.deltas.append((ev.t, ev.generated))
        elif isinstance(ev, Finished):
            self.finish(ev.stats, now)

    def finish(self, stats: ReplyStats | None, now: float) -> None:
        if not self.active:
            return
        self.active, self.phase, self.t_end = False, "done", now
        self.stats = stats
        if stats is not None:
            # A remote server tells its counts only at the end, if at all (None: not reported).
            if stats.decode_tokens is not None:
                self.generated = stats.decode_tokens
            if stats.cached_tokens is not None and not self.cached:
                self.cached = stats.cached_tokens
            if stats.prefill_tokens is not None and not self.new_total:
                self.new_total = stats.prefill_tokens
            if stats.kv_used is not None:
                self.kv_used = stats.kv_used
            if self.limits is not None and stats.source is None and stats.prefill_tokens and stats.prefill_s:
                self.gflop_s = self.limits.prefill_flop_s(stats.prefill_tokens, stats.prefill_s) / 1e9
            if self.limits is not None and stats.source is None and stats.decode_tok_s and stats.kv_used:
                _keep(MeasuredDecode(self.limits, stats.kv_used, stats.decode_tok_s))
            began = self.t_prefill - self.t_submit if self.t_prefill is not None else None
            self.turns.append(turn_from(stats, began))

    def prompt_progress(self) -> str | None:
        """While the prompt is read, how far (prompt_words); None in any other phase."""
        if not self.active or self.phase != "prefill":
            return None
        return prompt_words(self.new_done, self.new_total, self.prompt_rate)

    def fail(self, now: float) -> None:
        self.active, self.phase, self.t_end = False, "idle", now

    def rolling_rate(self) -> float | None:
        """Tokens a second over the last second of text, measured from the last delta before that
        second (or the first): speculation delivers tokens in bursts a check long, so a span
        inside one burst would read thousands a second. Under MIN_RATE_SPAN_S of text (one
        burst), the engine's own rate."""
        if len(self.deltas) < 2:
            return self.progress_rate
        t_last, g_last = self.deltas[-1]
        t_ref, g_ref = self.deltas[0]
        for t, g in self.deltas:
            if t_last - t < RATE_WINDOW_S:
                break
            t_ref, g_ref = t, g
        if t_last - t_ref < MIN_RATE_SPAN_S or g_last <= g_ref:
            return self.progress_rate
        return (g_last - g_ref) / (t_last - t_ref)

    def live_turn(self, now: float) -> Turn:
        """The reply in progress on the timeline: its wait, its prompt's reading and its decode
        so far, each growing until the next one begins."""
        began = self.t_prefill if self.t_prefill is not None else now
        first = self.t_first if self.t_first is not None else now
        wait = began - self.t_submit
        prefill = first - began if self.t_prefill is not None else 0.0
        decode = now - first if self.t_first is not None else 0.0
        setup = wait if self.preparing is not None else min(self.setup_s, wait)
        return Turn(wait, prefill, decode, self.cached, self.new_done, self.generated, self.ttft,
                    self.rolling_rate(), live=True, setup_s=setup)

    def snapshot(self, now: float) -> Snapshot:
        end = now if self.active else (self.t_end or now)
        elapsed = end - self.t_submit if self.t_submit else 0.0
        rate = self.rolling_rate()
        if self.active and self.phase == "decode" and rate and now - self._last_sample >= 0.1:
            self._last_sample = now
            self.series.append((now - (self.t_first or now), rate))
        ttft = self.ttft if self.ttft is not None else (elapsed if self.active else None)
        remaining = None
        if self.active and rate:
            remaining = max(0, self.max_tokens - self.generated) / rate
        st = self.stats
        recent = [t.ttft_s for t in self.turns if t.ttft_s is not None][-5:]
        new = self.new_total if st else self.new_done
        # Live, the prompt and every token fed back (all but the last sampled); then the engine's.
        kv_used = self.kv_used if st is not None and st.kv_used is not None else \
            self.cached + new + max(self.generated - 1, 0)
        bw = util = ceiling = mac_util = binds = mem_roof = mac_roof = None
        if self.limits is not None and (st is None or st.source is None) and self.phase != "idle":
            tok_s = rate if self.active else (st.decode_tok_s if st else None)
            bw, util, ceiling = self.limits.at(max(kv_used, 1), tok_s)
            roofs = self.limits.roofs(max(kv_used, 1), tok_s)
            mac_util, binds = roofs.compute_util, roofs.binds
            mem_roof, mac_roof = roofs.memory_tok_s, roofs.compute_tok_s
            if st is not None and st.bw_utilization is not None:  # the record's, computed once
                util, bw = st.bw_utilization, st.bw_utilization * self.limits.peak
        turns = [*self.turns, self.live_turn(now)] if self.active else list(self.turns)
        return Snapshot(
            active=self.active, phase=self.phase, ttft_s=ttft, ttft_final=self.ttft is not None,
            elapsed_s=elapsed, rate_tok_s=rate,
            prefill_tok_s=st.prefill_tok_s if st else None,
            decode_tok_s=st.decode_tok_s if st else None,
            generated=self.generated, max_tokens=self.max_tokens, remaining_s=remaining,
            n_ctx=st.n_ctx if st and st.n_ctx is not None else self.n_ctx, kv_cached=self.cached,
            kv_new=new, kv_new_total=self.new_total,
            kv_generated=max(0, kv_used - self.cached - new),
            dropped_tokens=st.dropped_tokens if st else 0,
            dropped_messages=st.dropped_messages if st else 0,
            rate_series=list(self.series), turns=turns, recent_ttft=recent,
            kv_cached_disk=st.cached_disk_tokens if st else self.cached_disk,
            source=st.source if st else None, wall_decode_tok_s=st.wall_decode_tok_s if st else None,
            bw_gbs=bw / 1e9 if bw else None, bw_utilization=util, ceiling_tok_s=ceiling,
            bw_source=self.limits.source if self.limits is not None else None,
            peak_gbs=self.limits.peak / 1e9 if self.limits is not None else None,
            prefill_gflop_s=self.gflop_s, compute_utilization=mac_util, binds=binds,
            memory_ceiling_tok_s=mem_roof, compute_ceiling_tok_s=mac_roof, stats=st,
            streaming=self.streaming, kv_used=kv_used,
            spec=self.spec if self.active else None,
            constrained=self.constrained if self.active else (st is not None and
                                                               st.grammar_ms_per_token is not None),
            grammar_ms=self.grammar_ms if self.active else (st.grammar_ms_per_token if st else None),
            prompt_tok_s=self.prompt_rate if self.active and self.phase == "prefill" else None,
            preparing=self.preparing if self.active and self.phase == "waiting" else None,
            reasoning_tokens=(st.reasoning_tokens or 0) if st else self.reasoning_tokens,
            thinking=self.active and bool(self.reasoning_tokens) and self.t_answer is None,
            think_budget=self.think_budget if self.active else None,
            ttfa_s=st.ttfa_s if st else (None if self.t_answer is None else self.t_answer - self.t_submit),
        )
