"""Continuous batching: many requests decoded together through one llama_batch.

Decode is memory-bandwidth-bound: one step reading the weights can advance a
token of every busy slot for little more than the cost of one. So each step
carries the next token of every slot (plus prefill chunks of newly admitted
prompts), and a slot whose request ends is refilled from the queue on the very
next step instead of waiting for the longest request of a fixed batch.

Threads (the rule is in the app.engine docstring): run() drives the batch
context on the calling thread (the window's batch thread, or the CLI's worker
thread), and only that thread touches it; submit_many, submit_online, pause,
resume, cancel and cancel_request are safe from any thread. Events go to
`on_event` (and each request's own `on_event`) on that thread; a Qt bridge
turns them into queued signals, exactly as for the chat Decoder.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace

import llama_cpp

from app.batch.context import BatchContext
from app.batch.slot import Slot, SlotState
from app.batch.types import (
    BatchEvent,
    BatchProgress,
    RequestDone,
    RequestStarted,
    SlotRequest,
    SlotResult,
    SlotStats,
)
from app.engine.control import common_prefix
from app.engine.errors import ContextOverflowError, EngineError
from app.engine.loader import LoadedModel
from app.engine.prompt import PromptMessage, chat_format, reply_stops
from app.engine.utilization import limits_for

# A step reads the weights once whatever the number of slots, so aggregate
# tok/s grows with slots until the step turns compute-bound; where that
# happens depends on the machine and the model (`llamadesk bench --batch`
# measures slot counts), so this is a default, set with --parallel.
DEFAULT_SLOTS = 32
# Sequences kept free for online requests. With every batch slot busy and the
# batch started in lockstep, "the next free slot" comes only after a whole
# request ends; a reserved sequence makes it the next decode step instead.
ONLINE_RESERVE = 1
DEFAULT_SLOT_CTX = 1024
PROGRESS_EVERY_S = 0.2
RATE_WINDOW_S = 3.0
# A step of this many prompt tokens and no decoding measures the arithmetic rate.
ARITHMETIC_STEP_TOKENS = 32


class BatchEngine:
    def __init__(self, model: LoadedModel, n_slots: int = DEFAULT_SLOTS,
                 slot_ctx: int = DEFAULT_SLOT_CTX,
                 on_event: Callable[[BatchEvent], None] | None = None, keep_prefixes: bool = False):
        """`keep_prefixes`: a finished request's tokens stay in its sequence, and the next
        request goes to the free sequence sharing the longest prefix with it, prefilling only
        the rest (a server's clients send each turn's whole history again)."""
        self.model = model
        self.keep_prefixes = keep_prefixes
        self.online_first = keep_prefixes  # the server's policy; the chat-during-batch path keeps sharing
        self.bctx = BatchContext(model, n_slots + ONLINE_RESERVE, slot_ctx)
        self.ctx = self.bctx.ctx
        self.n_slots = n_slots
        self.slot_ctx = self.bctx.slot_ctx
        self.n_batch = self.bctx.n_batch
        self.format, self.notice = chat_format(model)
        self.vocab = llama_cpp.llama_model_get_vocab(model.llm.model)
        self.n_vocab = model.llm.n_vocab()
        self.on_event = on_event
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._cv = threading.Condition()
        self._queue: deque[tuple[SlotRequest, float]] = deque()
        self._online: deque[tuple[SlotRequest, float]] = deque()
        self._drop: set[str] = set()
        self._paused = False
        self._cancelled = False
        self.slots: list[Slot | None] = [None] * (n_slots + ONLINE_RESERVE)
        self._kept: list[list[int]] = [[] for _ in self.slots]  # each free sequence's tokens in the KV
        self._results: list[SlotResult] = []
        self.limits = limits_for(model)  # None where no one peak applies (a partial GPU offload)
        # The server's batch-only steps can be cut short when an online request arrives (see _step).
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: bool(self._online))
        self._no_abort = llama_cpp.ggml_abort_callback()
        self.aborted_steps = 0
        self.flop_s: float | None = None  # the best arithmetic rate a pure prefill step reached
        self.t0 = time.perf_counter()
        self._reset_counters()

    # -- any thread ---------------------------------------------------------
    def submit_many(self, reqs: Iterable[SlotRequest]) -> None:
        now = time.perf_counter()
        with self._cv:
            for r in reqs:
                self._queue.append((r, now))
                self._total += 1
            self._cv.notify_all()

    def submit_online(self, req: SlotRequest) -> None:
        """An interactive request: it takes the next free slot ahead of the batch queue,
        and runs even while the batch is paused."""
        req.online = True
        with self._cv:
            self._online.append((req, time.perf_counter()))
            self._total += 1
            self._cv.notify_all()

    def pause(self) -> None:
        """Batch slots keep their KV but stop decoding; online requests still run."""
        with self._cv:
            self._paused = True
            self._cv.notify_all()

    def resume(self) -> None:
        with self._cv:
            self._paused = False
            self._cv.notify_all()

    def cancel(self) -> None:
        """End run() soon: busy slots finish as "cancelled", queued requests are dropped."""
        with self._cv:
            self._cancelled = True
            self._cv.notify_all()

    def cancel_request(self, custom_id: str) -> None:
        """Stop one request (the chat's stop button), queued or running."""
        with self._cv:
            self._drop.add(custom_id)
            self._cv.notify_all()

    def free(self) -> None:
        """Free the context; on the thread that ran run(), once it has returned."""
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.bctx.close()

    # -- prompts --------------------------------------------------------------
    def prompt_for(self, req: SlotRequest) -> tuple[list[int], tuple[str, ...]]:
        """Tokens and stop strings, formatted the way LocalChatEngine formats a turn."""
        if req.prompt_tokens is not None:
            return list(req.prompt_tokens), tuple(req.settings.stop)
        preamble = req.settings.preamble
        if req.build_prompt is not None:
            toks = self._built(req)
        else:
            toks = self.to_tokens(req.messages, preamble)
        return toks, reply_stops(self.format, tuple(req.settings.stop), req.settings.ignore_eos)

    def to_tokens(self, messages: list[PromptMessage], preamble: bool = True) -> list[int]:
        """Render messages in this engine's prompt format and tokenize them."""
        text = self.format.render(messages, preamble)
        return self.model.llm.tokenize(text.encode("utf-8"), add_bos=self.format.add_bos,
                                       special=self.format.special)

    def _built(self, req: SlotRequest) -> list[int]:
        """The caller's prompt builder, on this thread; whatever it raises fails the request."""
        try:
            return list(req.build_prompt(self.slot_ctx,
                                         lambda msgs: self.to_tokens(msgs, req.settings.preamble)))
        except (EngineError, ValueError):
            raise
        except Exception as e:  # noqa: BLE001 - a caller's bug fails one request, not the batch
            raise EngineError(f"building the prompt failed: {type(e).__name__}: {e}") from e

    # -- the engine thread ----------------------------------------------------
    def run(self) -> list[SlotResult]:
        """Decode until the queue and the slots are empty. Returns this run's results
        in finishing order."""
        self._reset_counters()
        results: list[SlotResult] = []
        self._results = results
        try:
            while True:
                with self._cv:
                    if self._cancelled:
                        break
                    self._admit_locked()
                    busy = any(s is not None for s in self.slots)
                    if not busy and not self._online and not self._queue:
                        break
                    runnable = any(s is not None and (s.req.online or not self._paused)
                                   for s in self.slots)
                    if not runnable:
                        self._progress(force=True)
                        t = time.perf_counter()
                        self._cv.wait(PROGRESS_EVERY_S)
                        if self._paused:
                            self._paused_s += time.perf_counter() - t
                        continue
                self._step()
                self._progress()
        finally:
            self._abort_all()
            with self._cv:
                self._cancelled = False
            self._progress(force=True)
        return results

    def _reset_counters(self) -> None:
        with self._cv:
            self._total = len(self._queue) + len(self._online)
        self._done = self._failed = self._generated = 0
        self._run_t0 = time.perf_counter()
        self._paused_s = 0.0
        self._last_progress = 0.0
        self._rate_marks: deque[tuple[float, int]] = deque()

    def _admit_locked(self) -> None:
        """Fill free slots: online requests first, then the batch queue (unless paused).
        The reserved sequence takes only online work."""
        if self._drop:
            self._queue = deque(x for x in self._queue if not self._dropped(x))
            self._online = deque(x for x in self._online if not self._dropped(x))
        while True:
            free = [seq for seq, s in enumerate(self.slots) if s is None]
            if not free:
                return
            if self._online:
                req, queued = self._online.popleft()
            elif any(seq < self.n_slots for seq in free) and self._queue and not self._paused:
                req, queued = self._queue.popleft()
                free = [seq for seq in free if seq < self.n_slots]
            else:
                return
            prepared = self._prepare(req, queued)
            if prepared is None:
                continue  # recorded as an error result
            toks, stop = prepared
            seq = self._best_seq(free, toks)
            self.slots[seq] = self._start(seq, req, toks, stop, queued)

    def _best_seq(self, free: list[int], toks: list[int]) -> int:
        """The free sequence whose kept tokens share the longest prefix with `toks`, the lowest
        on a tie: llama.cpp attends over the span of KV streams from the lowest to the highest
        sequence a step carries, so a turn parked in the last sequence while clients use the
        first few makes every step attend over all of them (bench --serve measured it)."""
        if not self.keep_prefixes:
            return free[0]
        return max(free, key=lambda seq: common_prefix(self._kept[seq], toks))

    def _dropped(self, item) -> bool:
        """A queued request cancelled before it got a slot ends as a "cancelled" result, so
        whoever waits for it (a chat turn, a server's client) hears that it ended."""
        req, queued = item
        if req.custom_id in self._drop:
            self._drop.discard(req.custom_id)
            self._total -= 1
            now = time.perf_counter()
            st = SlotStats(stop_reason="cancelled", online=req.online, queued_at=queued - self.t0,
                            finished_at=now - self.t0, total_s=now - queued)
            self._record(SlotResult(req.custom_id, "", st, req.line))
            return True
        return False

    def wait_for_work(self, timeout: float) -> bool:
        """Block until a request is queued (True) or `timeout` passes: a server's engine loop
        calls run() again only when there is something to run."""
        with self._cv:
            if not (self._queue or self._online):
                self._cv.wait(timeout)
            return bool(self._queue or self._online)

    def _prepare(self, req: SlotRequest, queued: float) -> tuple[list[int], tuple[str, ...]] | None:
        """The request's tokens and stop strings, or None after recording why it cannot run."""
        try:
            req.settings.validate()
            toks, stop = self.prompt_for(req)
            if not toks:
                raise EngineError("the prompt is empty")
            if len(toks) >= self.slot_ctx:
                raise ContextOverflowError(f"prompt is {len(toks)} tokens; a batch slot holds "
                                           f"{self.slot_ctx} (raise --ctx or shorten the prompt)")
        except (EngineError, ValueError) as e:
            kind = "context_overflow" if isinstance(e, ContextOverflowError) else "invalid_request"
            self._record(self._error_result(req, queued, time.perf_counter(), str(e), kind))
            return None
        return toks, stop

    def _start(self, seq: int, req: SlotRequest, toks: list[int], stop: tuple[str, ...],
               queued: float) -> Slot:
        now = time.perf_counter()
        settings = replace(req.settings, stop=stop)
        cached = self._keep_prefix(seq, toks)
        slot = Slot(seq, req, toks, settings, self.slot_ctx, self.n_vocab, self.vocab, queued, now)
        slot.prefilled = slot.n_past = slot.cached = cached
        self._emit(RequestStarted(req.custom_id, seq, now - self.t0))
        return slot

    def _keep_prefix(self, seq: int, toks: list[int]) -> int:
        """Cut the sequence back to what it shares with `toks`; how many tokens stay cached."""
        kept, self._kept[seq] = self._kept[seq], []
        n = min(common_prefix(kept, toks), len(toks) - 1) if self.keep_prefixes else 0
        if n > 0:
            mem = self.bctx.mem
            if (llama_cpp.llama_memory_seq_rm(mem, seq, n, -1)
                    and llama_cpp.llama_memory_seq_pos_max(mem, seq) == n - 1):
                return n
        self.bctx.clear_seq(seq)
        return 0

    def _error_result(self, req: SlotRequest, queued: float, now: float, msg: str,
                      kind: str) -> SlotResult:
        st = SlotStats(stop_reason="error", online=req.online, queued_at=queued - self.t0,
                        finished_at=now - self.t0, total_s=now - queued, error=msg, error_kind=kind)
        return SlotResult(req.custom_id, "", st, req.line)

    def _step(self) -> None:
        """One llama_decode: the next token of every decoding slot, then prompt chunks."""
        live = self._live()
        decoding = sum(s.state is SlotState.DECODING for s in live)
        # A step of batch tokens only, one per sequence, is one ubatch that llama.cpp can abort
        # between graph nodes and remove whole from the KV cache; the server aborts it when an
        # online request arrives, which then waits a fraction of a step instead of all of it.
        # The check is a Python callback per graph node, so only these steps carry it.
        abortable = (self.online_first and decoding == len(live) > 1 and not any(s.req.online for s in live)
                     and any(s is None for s in self.slots))  # an arriving request could start
        n, fed, outs = self._gather(live)
        if n == 0:
            return
        self._batch.n_tokens = n
        t = time.perf_counter()
        if abortable:
            llama_cpp.llama_set_abort_callback(self.ctx, self._abort_cb, None)
            try:
                rc = llama_cpp.llama_decode(self.ctx, self._batch)
            finally:
                llama_cpp.llama_set_abort_callback(self.ctx, self._no_abort, None)
            if rc == 2:  # aborted: nothing of the step stays in the KV; its tokens go again later
                self.aborted_steps += 1
                for s, _ in fed:
                    s.pending = s.fed.pop()
                return
        else:
            rc = llama_cpp.llama_decode(self.ctx, self._batch)
        if rc == 0 and not decoding and n >= ARITHMETIC_STEP_TOKENS and self.limits is not None:
            rate = self.limits.prefill_flop_s(n, time.perf_counter() - t)
            self.flop_s = max(self.flop_s or 0.0, rate)
        if rc != 0:
            for s in live:
                self._finish(s, error=f"llama_decode failed in a batch step (code {rc})")
            return
        for s, k in fed:
            s.n_past += k
        self._sample(outs)
        self._rate_marks.append((time.perf_counter(), self._generated))

    def _live(self) -> list[Slot]:
        """The slots this step may advance (batch slots wait while paused); drops cancelled ones."""
        paused = self._paused
        live = [s for s in self.slots if s is not None and (s.req.online or not paused)]
        if self.online_first and any(s.req.online and not s.shown for s in live):
            # Until an online request shows its first text, steps carry online slots only: a step
            # that also carries every batch slot's token takes longer, and that is its TTFT.
            live = [s for s in live if s.req.online]
        if self._drop:
            for s in live:
                if s.req.custom_id in self._drop:
                    self._drop.discard(s.req.custom_id)
                    self._finish(s, "cancelled")
            live = [s for s in live if s.state is not SlotState.FINISHED]
        return live

    def _gather(self, live: list[Slot]) -> tuple[int, list[tuple[Slot, int]], list[tuple[Slot, int]]]:
        """Fill the llama_batch; returns its size, (slot, tokens fed) and (slot, logits row)."""
        b = self._batch
        n = 0
        fed: list[tuple[Slot, int]] = []
        outs: list[tuple[Slot, int]] = []
        for s in live:  # one token for every decoding slot: the cheap part
            if s.state is SlotState.DECODING:
                self._put(b, n, s.pending, s.n_past, s.seq, True)
                s.fed.append(s.pending)
                s.pending = None
                outs.append((s, n))
                fed.append((s, 1))
                n += 1
        for s in live:  # prompt chunks fill what is left of n_batch
            if s.state is not SlotState.PREFILLING or n >= self.n_batch:
                continue
            take = min(self.n_batch - n, len(s.prompt) - s.prefilled)
            last = s.prefilled + take == len(s.prompt)
            for i in range(take):
                pos = s.prefilled + i
                self._put(b, n, s.prompt[pos], pos, s.seq, last and i == take - 1)
                n += 1
            if last:
                outs.append((s, n - 1))
            s.prefilled += take
            fed.append((s, take))
        return n, fed, outs

    def _sample(self, outs: list[tuple[Slot, int]]) -> None:
        """Sample each slot's token from its logits row; finished slots free their sequence."""
        for s, idx in outs:
            tok = s.sampler.sample(self.ctx, idx)
            before = s.generated
            done = s.accept(tok, time.perf_counter())
            self._generated += s.generated - before
            if done:
                self._finish(s)

    @staticmethod
    def _put(b, i: int, tok: int, pos: int, seq: int, logits: bool) -> None:
        b.token[i] = tok
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits

    def _finish(self, s: Slot, stop_reason: str | None = None, error: str | None = None) -> None:
        res = s.finish(time.perf_counter(), self.t0, stop_reason, error)
        if self.keep_prefixes and res.stats.error is None:
            self._kept[s.seq] = s.prompt[:s.prefilled] + s.fed  # exactly what the KV holds
        else:
            self.bctx.clear_seq(s.seq)
        self.slots[s.seq] = None
        self._record(res)

    def _record(self, res: SlotResult) -> None:
        if res.stats.stop_reason != "cancelled":
            self._done += 1
            self._failed += res.stats.error is not None
        self._results.append(res)
        self._emit(RequestDone(res))

    def _abort_all(self) -> None:
        """Cancellation: busy slots end as "cancelled" (not written as finished work)."""
        for s in self.slots:
            if s is not None:
                self._finish(s, "cancelled")
        if self._cancelled:
            with self._cv:
                self._queue.clear()
                self._online.clear()

    def _emit(self, ev: BatchEvent) -> None:
        if self.on_event is not None:
            self.on_event(ev)

    def _progress(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_progress = now
        marks = self._rate_marks
        while len(marks) > 2 and now - marks[0][0] > RATE_WINDOW_S:
            marks.popleft()
        rate = None
        if len(marks) >= 2 and marks[-1][0] > marks[0][0]:
            rate = (marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0])
        elapsed = max(1e-9, now - self._run_t0 - self._paused_s)
        avg = self._generated / elapsed if self._generated else None
        eta = None
        if self._done:
            eta = elapsed / self._done * max(0, self._total - self._done)
        busy = sum(s is not None for s in self.slots[:self.n_slots])
        ceiling = bound = None
        positions = [s.n_past for s in self.slots if s is not None and s.state is SlotState.DECODING]
        if self.limits is not None and positions:
            ceiling, bound = self.limits.batched_ceiling(positions, self.flop_s)
        self._emit(BatchProgress(
            done=self._done, failed=self._failed, total=self._total,
            queued=len(self._queue) + len(self._online), busy_slots=busy, n_slots=self.n_slots,
            online_busy=sum(s is not None and s.req.online for s in self.slots),
            generated=self._generated, elapsed_s=elapsed, tok_s=rate, avg_tok_s=avg, eta_s=eta,
            paused=self._paused, decoding=len(positions), ceiling_tok_s=ceiling, ceiling_bound=bound))
