"""The server's one BatchEngine on its own thread, and the door requests come in by.

Every request gets an id of the host's own (a client's custom_id is not
unique across batches); its events and its final RequestDone are handed to
the callback it came with, on the engine thread. Online requests are bounded:
past `max_waiting` queued, `submit_online` refuses, and the API answers 429
instead of letting memory grow without end.

An online chat request's prompt is rendered and tokenized on a thread of its
own (`llamadesk-serve-tokenize`) before it reaches the engine: half a
megabyte of messages takes the tokenizer a good part of a second, and on the
engine thread every other client's stream would wait that long for its next
token. llama.cpp's tokenizer reads only the weights' vocabulary, so it runs
beside the engine's decoding.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.errors import EngineError
from app.engine.loader import LoadedModel
from app.slots.engine import BatchEngine
from app.slots.speculation import BatchSpeculation
from app.slots.types import BatchProgress, RequestDone, RequestStarted, SlotRequest, SlotResult, SlotStats

log = logging.getLogger("llamadesk.serve")
TTFT_WINDOW_S = 60.0
# /health calls an engine stalled after this long without a step while work waits: far past one
# llama_decode of a full n_batch on a slow CPU, so only a wedged engine reads as one.
STALL_S = 120.0
# The server's KV layout: one unified cache. Chat clients come and go, so the busy sequences are
# seldom consecutive, and per-slot streams then read the weights once per run of consecutive
# sequences in every step; a unified cache is one ubatch whatever is busy, and a prefix shared
# between slots is the same cells, not a copied stream (app.slots.context; bench --serve).
SERVE_KV_UNIFIED = True
Sink = Callable[[object], None]  # receives engine events, then the RequestDone
_ids = itertools.count(1)


def _built(toks: list[int]) -> Callable[[int, Callable], list[int]]:
    """A prompt builder that hands the engine tokens made already: the engine then decodes them
    with its prompt format's stop strings, as if it had rendered the messages itself."""
    return lambda _slot_ctx, _to_tokens: toks


class Busy(Exception):
    """Too many online requests are waiting for a slot."""


@dataclass
class HostStats:
    """What the Server panel and /metrics read; updated on the engine thread."""

    busy_slots: int = 0  # of the n_slots batch slots
    busy: int = 0  # of all n_slots + 1 (the one kept for online requests included)
    n_slots: int = 0
    queued: int = 0
    online_busy: int = 0
    tok_s: float | None = None
    ceiling_tok_s: float | None = None  # for the sequences decoding now (BatchProgress)
    ceiling_bound: str | None = None
    decoding: int = 0
    generated: int = 0
    recent: list = field(default_factory=list)  # (time, custom_id, ttft_s, tok/s, online)
    kv_used: int = 0  # KV positions the busy sequences hold, of kv_cells (BatchProgress)
    kv_cells: int = 0
    steps: int = 0  # llama_decode calls so far, and the slots they carried in all
    step_slots: int = 0
    failed_runs: int = 0  # engine runs that raised (their requests ended with the error)
    # Online requests' TTFT over the last TTFT_WINDOW_S (nearest rank), for the Serve panel's
    # live p50 and p99 beside the aggregate rate; None before the first.
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_n: int = 0  # requests in that window
    ttft_at: float | None = None  # when the newest of them ended (time.time()): the window's age

    def took(self, window: deque[tuple[float, float]], now: float, ttft: float) -> None:
        """An online request showed its first text after `ttft` s: move the window's quantiles."""
        window.append((now, ttft))
        self.ttft_at = now
        while window and now - window[0][0] > TTFT_WINDOW_S:
            window.popleft()
        ts = sorted(t for _, t in window)
        self.ttft_n = len(ts)
        self.ttft_p50_s = ts[math.ceil(0.50 * len(ts)) - 1]
        self.ttft_p99_s = ts[math.ceil(0.99 * len(ts)) - 1]


class ServeEngine:
    def __init__(self, model: LoadedModel, n_slots: int, slot_ctx: int, max_waiting: int = 64,
                 prompt_cache: bool = True, kv_unified: bool = SERVE_KV_UNIFIED,
                 speculation: BatchSpeculation | None = None):
        """`prompt_cache`: the format's shared prefix is loaded from and saved to the user's disk
        prompt cache, as the window does; `kv_unified`: the KV layout (app.slots.context);
        `speculation`: a slot decoding alone guesses (app.slots.speculation; its owner closes it)."""
        self.model = model
        self.speculation = speculation
        self._options = {"prompt_cache": prompt_cache, "kv_unified": kv_unified}
        self._ttfts: deque[tuple[float, float]] = deque()
        self.max_waiting = max_waiting
        self.stats = HostStats(n_slots=n_slots)
        self._sinks: dict[str, Sink] = {}
        self._lock = threading.Lock()
        self._waiting = 0  # online requests submitted and not yet started
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.on_result: Callable[[SlotResult], None] | None = None  # /metrics
        self.engine: BatchEngine | None = None
        self._args = (n_slots, slot_ctx)
        self.thread = threading.Thread(target=self._loop, name="llamadesk-serve-engine", daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        self._to_tokenize: queue.Queue[SlotRequest | None] = queue.Queue()
        self._dropped: set[str] = set()  # cancelled while their prompt was being tokenized
        self._tokenizing: set[str] = set()
        self.tokenizer = threading.Thread(target=self._tokenize_loop, name="llamadesk-serve-tokenize",
                                          daemon=True)
        self.tokenizer.start()

    @property
    def stopping(self) -> bool:
        """Being closed: the requests it ends as cancelled now were cut by the server going down."""
        return self._stop.is_set()

    @property
    def slot_ctx(self) -> int:
        return self.engine.slot_ctx

    def _loop(self) -> None:
        try:  # the context is made, used and freed on this thread only
            self.engine = BatchEngine(self.model, *self._args, on_event=self._on_event, keep_prefixes=True,
                                      speculation=self.speculation, **self._options)
        except BaseException as e:  # noqa: BLE001 - re-raised in __init__
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                if self.engine.wait_for_work(0.2):
                    self._run()
        finally:
            self.engine.free()

    def _run(self) -> None:
        """One run of the engine. Whatever it raises has ended the busy requests with the error
        (BatchEngine.run) and is logged here: the thread serves every client, and goes on."""
        try:
            self.engine.run()
        except Exception:
            self.stats.failed_runs += 1
            log.exception("the engine's run failed; its busy requests ended with the error")

    def stalled(self) -> str | None:
        """Why the engine is not serving, for /health: its thread has ended, or work waits and no
        step has begun for STALL_S. None while it serves."""
        if not self.thread.is_alive():
            return "the engine thread has stopped"
        engine = self.engine
        if engine is None:
            return None
        quiet = time.monotonic() - engine.beat
        if quiet > STALL_S and (any(s is not None for s in engine.slots) or engine.sched.online_waiting()
                                or self._waiting):
            return f"the engine has not stepped for {quiet:.0f} s with work waiting"
        return None

    def close(self) -> None:
        self._stop.set()
        self._to_tokenize.put(None)
        if self.engine is not None:
            self.engine.cancel()
        self.thread.join(30)
        self.tokenizer.join(5)

    # -- any thread -----------------------------------------------------------
    def submit_online(self, req: SlotRequest, sink: Sink) -> str:
        """Queue an interactive request ahead of batch work; Busy when too many wait."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise Busy
            self._waiting += 1
            req.custom_id = f"o{next(_ids)}"
            self._sinks[req.custom_id] = sink
            tokenize = req.prompt_tokens is None and req.build_prompt is None
            if tokenize:
                self._tokenizing.add(req.custom_id)
        req.on_event = sink
        if tokenize:
            self._to_tokenize.put(req)
        else:
            self.engine.submit_online(req)
        return req.custom_id

    def submit_batch(self, reqs: list[SlotRequest], sink: Sink) -> list[str]:
        """Batch API work: it runs only in slots that online requests leave free."""
        with self._lock:
            for r in reqs:
                r.custom_id = f"b{next(_ids)}"
                self._sinks[r.custom_id] = sink
        self.engine.submit_many(reqs)
        return [r.custom_id for r in reqs]

    def cancel(self, rid: str) -> None:
        """A client went away, or a batch was cancelled: its slot is free by the next step.
        A request that already ended is left alone (the engine would remember its id forever)."""
        with self._lock:
            pending = rid in self._sinks
            if rid in self._tokenizing:
                self._dropped.add(rid)
                return
        if pending:
            self.engine.cancel_request(rid)

    # -- the tokenizer thread -------------------------------------------------
    def _tokenize_loop(self) -> None:
        while (req := self._to_tokenize.get()) is not None:
            error = None
            try:
                toks = self.engine.to_tokens(req.messages, req.settings.preamble,
                                             self.engine.thinking.kwargs(req))
            except (EngineError, ValueError) as e:
                error = str(e)
            except Exception as e:  # this thread serves every chat request: it must not die
                log.exception("tokenizing a prompt failed")
                error = f"tokenizing the prompt failed: {type(e).__name__}"
            with self._lock:
                self._tokenizing.discard(req.custom_id)
                dropped = req.custom_id in self._dropped
                self._dropped.discard(req.custom_id)
            if dropped or error is not None:
                st = SlotStats(stop_reason="cancelled" if dropped else "error", online=True, error=error,
                               error_kind=None if dropped else "invalid_request")
                self._on_event(RequestDone(SlotResult(req.custom_id, "", st)))
                continue
            req.build_prompt = _built(toks)
            self.engine.submit_online(req)

    # -- the engine thread ----------------------------------------------------
    def _on_event(self, ev) -> None:
        if isinstance(ev, BatchProgress):
            s = self.stats
            s.busy_slots, s.queued, s.online_busy = ev.busy_slots, ev.queued, ev.online_busy
            # The rate of the last few seconds' steps; with nothing decoding now it is none at all
            # (the last run's figure would stand on the gauge until the next request).
            s.tok_s, s.generated = ev.tok_s if ev.decoding else None, ev.generated
            s.ceiling_tok_s, s.ceiling_bound, s.decoding = ev.ceiling_tok_s, ev.ceiling_bound, ev.decoding
            s.kv_used, s.kv_cells = ev.kv_used, ev.kv_cells
            s.steps, s.step_slots = self.engine.steps, self.engine.step_slots
            s.busy = sum(x is not None for x in self.engine.slots)
            return
        if isinstance(ev, RequestStarted):
            if ev.custom_id.startswith("o"):
                with self._lock:
                    self._waiting -= 1
            return
        if isinstance(ev, RequestDone):
            res = ev.result
            with self._lock:
                sink = self._sinks.pop(res.custom_id, None)
                if res.custom_id.startswith("o") and res.stats.slot_start is None:
                    self._waiting -= 1  # ended before it got a slot (refused, or cancelled queued)
                st = res.stats  # the engine's thread and the tokenizer's both end requests
                done = (time.time(), res.custom_id, st.ttft_from_queue_s, st.decode_tok_s, st.online)
                self.stats.recent = [*self.stats.recent[-49:], done]
                if st.online and st.ttft_from_queue_s is not None:
                    self.stats.took(self._ttfts, done[0], st.ttft_from_queue_s)
            if self.on_result is not None:
                self.on_result(res)
            if sink is not None:
                sink(ev)
