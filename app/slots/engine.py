"""Continuous batching: many requests decoded together through one llama_batch.

Decode is memory-bandwidth-bound: one step reading the weights can advance a
token of every busy slot for little more than the cost of one. So each step
carries the next token of every slot (plus prefill chunks of newly admitted
prompts), and a slot whose request ends is refilled from the queue on the very
next step instead of waiting for the longest request of a fixed batch.

This module is the mechanics of a step (the llama_batch, llama_decode and its
abort callback, sampling, the KV sequence edits, the events). Which requests
get which sequences, which slots a step carries, and the progress arithmetic
are app.slots.scheduler's, so that policy is tested without a model.

Threads (the rule is in the app.engine docstring): run() drives the batch
context on the calling thread (the window's batch thread, or the CLI's worker
thread), and only that thread touches it; submit_many, submit_online, pause,
resume, cancel and cancel_request are safe from any thread (they only take the
scheduler's condition lock). Events go to `on_event` (and each request's own
`on_event`) on that thread; a Qt bridge turns them into queued signals, exactly
as for the chat Decoder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import llama_cpp

from app.engine.errors import ContextOverflowError, EngineError
from app.engine.grammar import GrammarError, compile_grammar
from app.engine.loader import LoadedModel
from app.engine.message import MessageBody
from app.engine.prompt import chat_format, reply_stops
from app.engine.prompt_cache import PromptCache
from app.engine.speculative import K_MAX, Speculation
from app.engine.utilization import limits_for
from app.slots.context import BatchContext
from app.slots.prefixes import Prefixes
from app.slots.scheduler import ONLINE_RESERVE, Prepared, Scheduler, SlotState
from app.slots.slot import Slot
from app.slots.speculation import CHECK_ROWS, BatchSpeculation
from app.slots.thinking import SlotThinking
from app.slots.types import (
    BatchEvent,
    BatchProgress,
    RequestDone,
    RequestStarted,
    SlotRequest,
    SlotResult,
    SlotStats,
)

log = logging.getLogger("llamadesk.batch")

# A step reads the weights once whatever the number of slots, so aggregate
# tok/s grows with slots until the step turns compute-bound; where that
# happens depends on the machine and the model (`llamadesk bench --batch`
# measures slot counts), so this is a default, set with --parallel.
DEFAULT_SLOTS = 32
DEFAULT_SLOT_CTX = 1024
# A step of this many prompt tokens and no decoding measures the arithmetic rate.
ARITHMETIC_STEP_TOKENS = 32
# The KV layout when none is asked for (app.slots.context weighs the two).
DEFAULT_UNIFIED = False


def _failure(what: str, e: Exception) -> str:
    return f"{what} failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}"


class BatchEngine:
    def __init__(self, model: LoadedModel, n_slots: int = DEFAULT_SLOTS,
                 slot_ctx: int = DEFAULT_SLOT_CTX,
                 on_event: Callable[[BatchEvent], None] | None = None, keep_prefixes: bool = False,
                 kv_unified: bool | None = None, share_prefixes: bool = True, prompt_cache: bool = False,
                 speculation: BatchSpeculation | None = None):
        """`keep_prefixes`: a finished request's tokens stay in its sequence, and the next
        request goes to the free sequence sharing the longest prefix with it, prefilling only
        the rest (a server's clients send each turn's whole history again).
        `kv_unified`: the KV layout (app.slots.context), None for DEFAULT_UNIFIED.
        `share_prefixes`: a prompt takes the prefix another sequence holds (app.slots.prefixes).
        `prompt_cache`: the format's shared prefix is loaded from and saved to the disk prompt
        cache (the user's cache folder).
        `speculation`: a slot that decodes alone guesses its next tokens (app.slots.speculation);
        the model's cache must rewind (LoadedModel.rewinds)."""
        self.model = model
        unified = DEFAULT_UNIFIED if kv_unified is None else kv_unified
        self.speculation = speculation
        self.bctx = BatchContext(model, n_slots + ONLINE_RESERVE, slot_ctx, unified,
                                 outputs=CHECK_ROWS if speculation is not None else 0)
        self.ctx = self.bctx.ctx
        self.n_slots = n_slots
        self.slot_ctx = self.bctx.slot_ctx
        self.n_batch = self.bctx.n_batch
        self.format, self.notice = chat_format(model)
        self.vocab = llama_cpp.llama_model_get_vocab(model.llm.model)
        self.n_vocab = model.llm.n_vocab()
        self.thinking = SlotThinking(model, self.format, self.vocab)
        self.on_event = on_event
        self._llama_batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        # online_first is the server's policy; the chat-during-batch path keeps sharing steps.
        self.sched: Scheduler[SlotRequest, Slot] = Scheduler(
            n_slots, self._prepare, self._start, self._dropped,
            keep_prefixes=keep_prefixes, online_first=keep_prefixes, reserve=ONLINE_RESERVE)
        self.slots = self.sched.slots  # by sequence; None where free
        cache = PromptCache(model, ctx=self.ctx, params=self.bctx.params) if prompt_cache else None
        if cache is not None and (why := cache.unusable()) is not None:
            log.warning("prompt cache off: %s", why)
            cache = None
        self.prefixes = Prefixes(self.bctx, self.sched, self.to_tokens, cache, share_prefixes)
        self._results: list[SlotResult] = []
        self.limits = limits_for(model)  # None where no one peak applies (a partial GPU offload)
        # The server's batch-only steps can be cut short when an online request arrives (see _step).
        online_waiting = self.sched.online_waiting
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: online_waiting())
        self._no_abort = llama_cpp.ggml_abort_callback()
        self.aborted_steps = 0
        self.steps = self.step_slots = 0  # llama_decode calls that ran, and the slots they carried
        self.flop_s: float | None = None  # the best arithmetic rate a pure prefill step reached
        self.t0 = time.perf_counter()
        self.beat = time.monotonic()  # the last step's start, or the last wait for work: /health reads it

    @property
    def unified(self) -> bool:
        return self.bctx.unified

    @property
    def keep_prefixes(self) -> bool:
        return self.sched.keep_prefixes

    @property
    def online_first(self) -> bool:
        return self.sched.online_first

    # -- any thread ---------------------------------------------------------
    def submit_many(self, reqs: Iterable[SlotRequest]) -> None:
        self.sched.submit_many(reqs)

    def submit_online(self, req: SlotRequest) -> None:
        """An interactive request: it takes the next free slot ahead of the batch queue,
        and runs even while the batch is paused."""
        self.sched.submit_online(req)

    def pause(self) -> None:
        """Batch slots keep their KV but stop decoding; online requests still run."""
        self.sched.pause()

    def resume(self) -> None:
        self.sched.resume()

    def cancel(self) -> None:
        """End run() soon: busy slots finish as "cancelled", queued requests are dropped."""
        self.sched.cancel()

    def cancel_request(self, custom_id: str) -> None:
        """Stop one request (the chat's stop button), queued or running."""
        self.sched.cancel_request(custom_id)

    def wait_for_work(self, timeout: float) -> bool:
        """Block until a request is queued (True) or `timeout` passes: a server's engine loop
        calls run() again only when there is something to run."""
        self.beat = time.monotonic()
        return self.sched.wait_for_work(timeout)

    def free(self) -> None:
        """Free the context; on the thread that ran run(), once it has returned."""
        if self._llama_batch is not None:
            llama_cpp.llama_batch_free(self._llama_batch)
            self._llama_batch = None
        self.bctx.close()

    # -- prompts --------------------------------------------------------------
    def prompt_for(self, req: SlotRequest) -> Prepared:
        """Tokens and stop strings, formatted the way LocalChatEngine formats a turn."""
        if req.prompt_tokens is not None:
            return list(req.prompt_tokens), tuple(req.settings.stop)
        preamble = req.settings.preamble
        if req.build_prompt is not None:
            toks = self._built(req)
        else:
            toks = self.to_tokens(req.messages, preamble, self.thinking.kwargs(req))
        return toks, reply_stops(self.format, tuple(req.settings.stop), req.settings.ignore_eos)

    def to_tokens(self, messages: list[MessageBody], preamble: bool = True,
                  template_kwargs: dict | None = None) -> list[int]:
        """Render messages in this engine's prompt format (with a template's kwargs) and tokenize them."""
        text = self.format.render(messages, preamble, template_kwargs)
        return self.model.llm.tokenize(text.encode("utf-8"), add_bos=self.format.add_bos,
                                       special=self.format.special)

    def _built(self, req: SlotRequest) -> list[int]:
        """The caller's prompt builder, on this thread; whatever it raises fails the request."""
        build = req.build_prompt
        assert build is not None  # prompt_for calls this only when the request has a builder
        kw = self.thinking.kwargs(req)
        try:
            return list(build(self.slot_ctx, lambda msgs: self.to_tokens(msgs, req.settings.preamble, kw)))
        except (EngineError, ValueError):
            raise
        except Exception as e:
            raise EngineError(f"building the prompt failed: {type(e).__name__}: {e}") from e

    # -- the engine thread ----------------------------------------------------
    def run(self) -> list[SlotResult]:
        """Decode until the queue and the slots are empty. Returns this run's results
        in finishing order."""
        self.sched.begin_run()
        results: list[SlotResult] = []
        self._results = results
        failed: str | None = None
        try:
            while self.sched.next_turn(idle=self._idle):
                self.beat = time.monotonic()
                self._step()
                self._progress()
        except Exception as e:
            failed = _failure("a batch step", e)  # the busy slots' error; the caller logs and goes on
            raise
        finally:
            for s in self.slots:  # cancellation: busy slots end as "cancelled", not finished work
                if s is not None:
                    self._finish(s, "cancelled" if failed is None else None, failed)
            self.sched.end_run()
            self._progress(force=True)
        return results

    def _idle(self) -> None:
        """Only paused slots are busy: nothing steps, and that is no stall."""
        self.beat = time.monotonic()
        self._progress(force=True)

    def _prepare(self, req: SlotRequest, queued: float) -> Prepared | None:
        """The request's tokens and stop strings, or None after recording why it cannot run."""
        try:
            req.settings.validate()
            if req.settings.constraint is not None:
                compile_grammar(req.settings.constraint)  # a bad one fails this request, not a slot
            toks, stop = self.prompt_for(req)
            if not toks:
                raise EngineError("the prompt is empty")
            if len(toks) >= self.slot_ctx:
                raise ContextOverflowError(f"prompt is {len(toks)} tokens; a batch slot holds "
                                           f"{self.slot_ctx} (raise --ctx or shorten the prompt)")
        except (EngineError, ValueError) as e:
            kind = "context_overflow" if isinstance(e, ContextOverflowError) else "invalid_request"
            self._record(self._unstarted(req, queued, "error", str(e), kind))
            return None
        return toks, stop

    def _dropped(self, req: SlotRequest, queued: float) -> None:
        self._record(self._unstarted(req, queued, "cancelled"))

    def _unstarted(self, req: SlotRequest, queued: float, stop_reason: str, error: str | None = None,
                   kind: str | None = None) -> SlotResult:
        """The result of a request that ended before it had a slot."""
        now = time.perf_counter()
        st = SlotStats(stop_reason=stop_reason, online=req.online, queued_at=queued - self.t0,
                       finished_at=now - self.t0, total_s=now - queued, error=error, error_kind=kind)
        return SlotResult(req.custom_id, "", st, req.line, req.reply_as)

    def _start(self, seq: int, req: SlotRequest, prepared: Prepared, queued: float) -> Slot | None:
        """The request's slot, or None after recording why it could not have one: its
        constraint's matcher is built here, and may refuse this vocabulary."""
        toks, stop = prepared
        now = time.perf_counter()
        settings = replace(req.settings, stop=stop)
        try:
            thinking = self.thinking.reply(req)
            opening = self.thinking.opening(req, thinking) if thinking is not None else ""
            slot = Slot(seq, req, toks, settings, self.slot_ctx, self.n_vocab, self.vocab, queued, now,
                        thinking, opening)
        except (EngineError, ValueError) as e:
            self._record(self._unstarted(req, queued, "error", str(e), "invalid_request"))
            return None
        except Exception as e:  # one request's failure, never the engine's
            log.exception("starting %s failed", req.custom_id)
            self._record(self._unstarted(req, queued, "error", _failure("starting the request", e),
                                         "generation_failed"))
            return None
        slot.take_prefix(self.prefixes.keep(seq, toks))
        slot.spec_mode = self.speculation.mode if self.speculation is not None else None
        self.prefixes.plan(slot)
        self._emit(RequestStarted(req.custom_id, seq, now - self.t0))
        return slot

    def _step(self) -> None:
        """One llama_decode: the next token of every decoding slot, then prompt chunks."""
        live, cancelled = self.sched.step_slots()
        for s in cancelled:
            self._finish(s, "cancelled")
        self.prefixes.resolve(live)
        solo = self._solo(live)
        guesses = solo.guesses(self._room(live[0])) if solo is not None else []
        t0 = time.perf_counter()
        if guesses:
            assert solo is not None  # guesses come only from the slot decoding alone
            self._check(live[0], solo, guesses, t0)
            return
        decoding = sum(s.state is SlotState.DECODING for s in live)
        # An abortable step (the scheduler says which) waits for an arriving online request a
        # fraction of a step instead of all of it; llama.cpp rolls it back whole from the KV.
        abortable = self.sched.abortable(live)
        n, fed, outs = self._gather(live)
        if n == 0:
            return
        self._llama_batch.n_tokens = n
        t = time.perf_counter()
        if abortable:
            llama_cpp.llama_set_abort_callback(self.ctx, self._abort_cb, None)
            try:
                rc = llama_cpp.llama_decode(self.ctx, self._llama_batch)
            finally:
                llama_cpp.llama_set_abort_callback(self.ctx, self._no_abort, None)
            if rc == 2:  # aborted: nothing of the step stays in the KV; its tokens go again later
                self.aborted_steps += 1
                for s, _ in fed:
                    s.pending = s.fed.pop()
                return
        else:
            rc = llama_cpp.llama_decode(self.ctx, self._llama_batch)
        if rc == 0 and not decoding and n >= ARITHMETIC_STEP_TOKENS and self.limits is not None:
            rate = self.limits.prefill_flop_s(n, time.perf_counter() - t)
            self.flop_s = max(self.flop_s or 0.0, rate)
        if rc != 0:
            for s in live:
                self._finish(s, error=f"llama_decode failed in a batch step (code {rc})")
            return
        for s, k in fed:
            s.n_past += k
        self.steps += 1
        self.step_slots += len(fed)
        self.prefixes.stepped(fed)
        self._sample(outs)
        if solo is not None and live[0].state is SlotState.DECODING:
            assert self.speculation is not None  # a slot has a Speculation only when the engine has one
            self.speculation.plain_step(solo, time.perf_counter() - t0)
        self.sched.counters.stepped(time.perf_counter())

    def _solo(self, live: list[Slot]) -> Speculation | None:
        """The Speculation of the slot this step carries alone, when the engine speculates."""
        if self.speculation is None or (s := self.sched.alone(live)) is None:
            return None
        return self.speculation.of(s)

    def _room(self, s: Slot) -> int:
        """How many guesses a check of `s` may carry: what its reply, its sequence's cells and a
        step have left."""
        return min(s.max_new - s.generated, self.slot_ctx - s.n_past - 1, self.n_batch - 1, K_MAX)

    def _check(self, s: Slot, spec: Speculation, guesses: list[int], t0: float) -> None:
        """A step of `s` alone evaluating its pending token and guesses at the next ones, a logits
        row each. Its sampler draws row by row, and a guess is kept while the draw equals it, as
        in the chat decoder (app.engine.speculative): the reply is the model's own. The rejected
        guesses' rows leave the sequence; the draw that ended the run is the next pending token."""
        assert s.pending is not None  # alone() gives a decoding slot, which holds its last sample
        toks = (s.pending, *guesses)
        spec.checks.append((s.n_past, toks))
        b = self._llama_batch
        for i, tok in enumerate(toks):
            self._put(b, i, tok, s.n_past + i, s.seq, True)
        b.n_tokens = len(toks)
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            self._finish(s, error=f"llama_decode failed in a speculative check (code {rc})")
            return
        self.steps += 1
        self.step_slots += 1
        s.fed.append(s.pending)
        s.pending, s.n_past = None, s.n_past + 1
        counters = self.sched.counters
        kept, done = 0, False
        for i in range(len(toks)):
            before = s.generated
            try:
                tok = s.sampler.sample(self.ctx, i)
                agrees = i < len(guesses) and tok == guesses[i]
                done = s.accept(tok, time.perf_counter())
            except Exception as e:  # noqa: BLE001 - as in _sample
                self._failed(s, e)
                return
            kept += agrees
            counters.generated += s.generated - before
            if done or not agrees:
                break
            s.fed.append(tok)  # its KV row is this pass's row i + 1
            s.pending, s.n_past = None, s.n_past + 1
        if not self.bctx.cut(s.seq, s.n_past):  # the rejected guesses' rows
            self._finish(s, error="the rejected guesses could not be removed from the KV cache")
            return
        spec.pacer.check(len(guesses), kept, time.perf_counter() - t0 + spec.guess_s)
        if done:
            self._finish(s)
        counters.stepped(time.perf_counter())

    def _gather(self, live: list[Slot]) -> tuple[int, list[tuple[Slot, int]], list[tuple[Slot, int]]]:
        """Fill the llama_batch; returns its size, (slot, tokens fed) and (slot, logits row)."""
        b = self._llama_batch
        n = 0
        fed: list[tuple[Slot, int]] = []
        outs: list[tuple[Slot, int]] = []
        for s in live:  # one token for every decoding slot: the cheap part
            if s.state is SlotState.DECODING:
                assert s.pending is not None  # a decoding slot holds the token it sampled last
                self._put(b, n, s.pending, s.n_past, s.seq, True)
                s.fed.append(s.pending)
                s.pending = None
                outs.append((s, n))
                fed.append((s, 1))
                n += 1
        for s in live:  # prompt chunks fill what is left of n_batch
            if s.state is not SlotState.PREFILLING or s.waiting or n >= self.n_batch:
                continue
            take = min(self.n_batch - n, self.prefixes.chunk_end(s) - s.prefilled)
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
        counters = self.sched.counters
        for s, idx in outs:
            before = s.generated
            try:
                done = s.accept(s.sampler.sample(self.ctx, idx), time.perf_counter())
            except Exception as e:  # noqa: BLE001 - this slot's sampler or grammar: its reply ends
                self._failed(s, e)
                continue
            counters.generated += s.generated - before
            if done:
                self._finish(s)

    def _failed(self, s: Slot, e: Exception) -> None:
        """A slot's sampling failed (a constraint that breaks down mid-reply): that reply ends with
        the error, the other slots go on."""
        if isinstance(e, EngineError):
            self._finish(s, error=str(e), kind="invalid_request" if isinstance(e, GrammarError) else None)
            return
        log.exception("sampling %s failed", s.req.custom_id)
        self._finish(s, error=_failure("sampling", e))

    @staticmethod
    def _put(b, i: int, tok: int, pos: int, seq: int, logits: bool) -> None:
        b.token[i] = tok
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits

    def _finish(self, s: Slot, stop_reason: str | None = None, error: str | None = None,
                kind: str | None = None) -> None:
        res = s.finish(time.perf_counter(), self.t0, stop_reason, error, kind)
        self.prefixes.counted(s)
        kv = s.prompt[:s.prefilled] + s.fed if res.stats.error is None else None  # exactly what the KV holds
        if not self.sched.release(s.seq, kv):
            self.bctx.clear_seq(s.seq)
        self._record(res)

    def _record(self, res: SlotResult) -> None:
        self.sched.counters.ended(res.stats.stop_reason, res.stats.error)
        self._results.append(res)
        self._emit(RequestDone(res))

    def _emit(self, ev: BatchEvent) -> None:
        if self.on_event is not None:
            self.on_event(ev)

    def _progress(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.sched.counters.due(now, force):
            return
        positions = [s.n_past for s in self.slots if s is not None and s.state is SlotState.DECODING]
        ceiling = bound = None
        if self.limits is not None and positions:
            ceiling, bound = self.limits.batched_ceiling(positions, self.flop_s)
        held = sum(s.n_past for s in self.slots if s is not None)
        self._emit(BatchProgress(**self.sched.figures(now), decoding=len(positions),
                                 ceiling_tok_s=ceiling, ceiling_bound=bound, kv_used=held,
                                 kv_cells=self.bctx.n_slots * self.slot_ctx))
