"""The Batch window's thread: a BatchJob on its own QThread and its own llama context.

The batch builds a second llama.cpp context over the weights the chat already
loaded (no second copy of the file); only this thread creates, uses and frees
that context, and the chat's context stays on the chat's engine thread (the
rule is in app/engine's docstring). The GUI thread calls only the
BatchEngine's thread-safe controls, through BatchWorker's methods. The
worker's lock guards the worker's own fields and is never held while calling
the engine: the engine calls back into the worker while holding its own lock,
and holding both in opposite orders would deadlock.

While a batch runs, chat turns can be routed here: they take the engine's
reserved online slot, go through the same context budget as any chat turn
(fitted on this thread, against the slot's context), and are reported through
this worker's own chat_* signals, which the runner forwards to the chat.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from app.batch_jsonl.job import BatchJob
from app.chat.routed import RoutedTurn
from app.engine.loader import LoadedModel
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError
from app.slots.backend import SlotBackend
from app.slots.engine import DEFAULT_SLOT_CTX, BatchEngine
from app.slots.types import RequestDone, SlotRequest
from app.ui.batch.counts import BatchPlan, Planned
from app.ui.threads import WorkerThread

log = logging.getLogger("llamadesk.ui.batch")
_online_ids = itertools.count(1)


@dataclass
class BatchTarget:
    """What a batch runs on: the chat's loaded weights, or a server (make_engine builds a
    RemoteBatchEngine on the batch thread, so its HTTP never runs on the GUI thread)."""

    model: LoadedModel | None
    name: str
    make_engine: Callable[[int], SlotBackend] | None = None  # n_slots -> engine


@dataclass
class BatchSpec:
    input_path: str
    output_path: str
    n_slots: int
    defaults: GenerationSettings
    target: BatchTarget
    slot_ctx: int = DEFAULT_SLOT_CTX


def _prompt(req: SlotRequest | None) -> str:
    """What a row shows of a request: its last user message (a chat body's question)."""
    if req is None or not req.messages:
        return ""
    users = [m.content for m in req.messages if m.role == "user"]
    return str(users[-1] if users else req.messages[-1].content)


def plan_of(job: BatchJob) -> BatchPlan:
    return BatchPlan([Planned(it.custom_id, it.line, _prompt(it.request), it.error) for it in job.todo],
                     job.skipped)


class BatchWorker(QObject):
    batch_event = Signal(object)  # BatchProgress / RequestStarted / RequestDone
    started = Signal(object)  # BatchPlan: the lines to decode (ids, prompts), skipped ones
    finished = Signal(object)  # JobSummary
    failed = Signal(str)  # one line: bad input, no context
    chat_event = Signal(object, object)  # chat job id, engine event
    chat_replied = Signal(object, object)  # chat Job, Reply
    chat_failed = Signal(object, str, bool)  # chat Job, message, is a context overflow

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # guards every field below
        self.engine: SlotBackend | None = None
        self.cancelled = False
        self.accepting = False  # chat turns may be routed here
        self.online: dict[str, RoutedTurn] = {}

    @Slot(object)
    def run(self, spec: BatchSpec) -> None:
        try:
            job = BatchJob(spec.input_path, spec.output_path, spec.defaults)
            with self.lock:
                if self.cancelled:
                    return
            t = spec.target
            engine = (t.make_engine(spec.n_slots) if t.make_engine is not None
                      else BatchEngine(t.model, spec.n_slots, spec.slot_ctx))
            with self.lock:
                self.engine = engine
                # A server answers chat turns beside the batch by itself: none is routed here.
                self.accepting = t.make_engine is None
                if self.cancelled:
                    return
            self.started.emit(plan_of(job))
            summary = job.run(engine, t.name, self._sink)
            self._drain()
            self.finished.emit(summary)
        except (LlamaDeskError, ValueError, OSError) as e:
            self.failed.emit(str(e))
        except Exception as e:
            log.exception("batch crashed")
            self.failed.emit(f"{type(e).__name__}: {e}")
        finally:
            self._fail_online("the batch stopped before this message was answered")
            with self.lock:
                engine, self.engine = self.engine, None
            if engine is not None:
                engine.free()

    def _drain(self) -> None:
        """A chat turn routed in as the batch ended still gets its answer."""
        with self.lock:
            self.accepting = False
            pending = bool(self.online) and not self.cancelled
            engine = self.engine
        if pending and engine is not None:
            engine.on_event = self._drain_event
            engine.run()

    def _drain_event(self, ev) -> None:
        if isinstance(ev, RequestDone):
            self._online_done(ev)

    def _sink(self, ev) -> None:
        if isinstance(ev, RequestDone) and ev.result.stats.online:
            self._online_done(ev)  # a chat turn, not a batch result
        else:
            self.batch_event.emit(ev)

    # -- any thread -----------------------------------------------------------
    def _engine(self) -> SlotBackend | None:
        with self.lock:
            return self.engine

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            self.accepting = False
            engine = self.engine
        if engine is not None:
            engine.cancel()

    def pause(self, on: bool) -> None:
        engine = self._engine()
        if engine is not None:
            (engine.pause if on else engine.resume)()

    def route(self, job) -> bool:
        """Serve a chat turn (an engine_thread.Job) in the online slot; False: not running."""
        cid = f"chat-{next(_online_ids)}"
        turn = RoutedTurn(job.history, job.user_text, job.settings, job.system, job.cancel,
                          lambda ev: self.chat_event.emit(job.id, ev),
                          lambda reply: self._online_end(cid, lambda: self.chat_replied.emit(job, reply)),
                          lambda msg, overflow: self._online_end(
                              cid, lambda: self.chat_failed.emit(job, msg, overflow)))
        req = turn.request(cid)
        with self.lock:
            if not self.accepting or not isinstance(self.engine, BatchEngine):
                return False
            self.online[cid] = turn
            engine = self.engine
        turn.request_id, turn.stop = cid, engine.cancel_request  # the chat's Stop button
        # Registered first: from here the turn is answered, or failed by _fail_online.
        engine.submit_online(req)
        return True

    # -- the batch thread ------------------------------------------------------
    def _online_end(self, cid: str, tell) -> None:
        with self.lock:
            self.online.pop(cid, None)
        tell()

    def _online_done(self, ev: RequestDone) -> None:
        """Online requests that never got a slot (too long, cancelled) end here."""
        with self.lock:
            turn = self.online.get(ev.result.custom_id)
        if turn is not None:
            turn.done(ev)

    def _fail_online(self, message: str) -> None:
        with self.lock:
            left, self.online = list(self.online.values()), {}
            self.accepting = False
        for turn in left:
            turn.abandon(message)


class BatchRunner(QObject):
    """GUI-thread handle: one QThread per batch, joined on cancel or close.

    It is also the chat's router (engine_thread.ChatRouter): while a batch runs
    and `route_chat` is on, chat turns go to the batch's online slot, and
    their signals come back through this object's chat_* signals.
    """

    chat_event = Signal(object, object)
    chat_replied = Signal(object, object)
    chat_failed = Signal(object, str, bool)
    _request_run = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.batch_thread: WorkerThread | None = None
        self.worker: BatchWorker | None = None
        self.route_chat = False  # the Batch window's checkbox

    @property
    def running(self) -> bool:
        return self.batch_thread is not None and self.batch_thread.isRunning()

    def start(self, spec: BatchSpec, connect: Callable[[BatchWorker], None]) -> BatchWorker:
        """`connect` wires the worker's signals before it runs, so a fast failure is not missed."""
        self.join()
        self.worker = w = BatchWorker()
        # quit_on: the thread's loop ends as soon as run() returns, not after a GUI round trip.
        self.batch_thread = WorkerThread("llamadesk-batch", w, requests=((self._request_run, w.run),),
                                         quit_on=(w.finished, w.failed), stop=w.cancel, log=log,
                                         busy="batch thread still busy after %.1f s")
        # Not cut off at shutdown (not `forward`): a chat turn routed here still hears that it
        # failed when the batch stops under it.
        w.chat_event.connect(self.chat_event)
        w.chat_replied.connect(self.chat_replied)
        w.chat_failed.connect(self.chat_failed)
        connect(w)
        self.batch_thread.start()
        self._request_run.emit(spec)
        return w

    def pause(self, on: bool) -> None:
        if self.worker is not None:
            self.worker.pause(on)

    def route(self, job) -> bool:
        return self.route_chat and self.running and self.worker is not None and self.worker.route(job)

    def join(self, timeout_s: float = 2.0) -> bool:
        """Cancel a running batch and wait for its thread; finished results are already on disk.
        Only a context being created (not interruptible) outlasts `timeout_s` (threads.py)."""
        if self.batch_thread is None:
            return True
        ok = self.batch_thread.shutdown(timeout_s)
        if ok:
            self.batch_thread = None
            self.worker = None
        return ok
