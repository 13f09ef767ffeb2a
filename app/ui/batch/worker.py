"""The Batch panel's worker: a BatchJob on its own QThread, beside the chat's engine thread.

The batch gets a second llama.cpp context over the weights the chat already
loaded (no second copy of the file), and only this thread touches it; the
chat's ChatEngine context stays on the engine thread. Engine events become
queued signals; the GUI only calls the BatchEngine's thread-safe controls
(pause, resume, cancel, submit_online).

While a batch runs, chat turns can be routed here (`route`): they take the
engine's reserved online slot, so a reply starts on the next decode step
instead of competing with 32 busy sequences for the CPU from another context.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from app.engine.prompt import Msg
from app.chat.session import Reply
from app.batch.engine import DEFAULT_SLOT_CTX, BatchEngine
from app.batchfile.io import BatchInputError
from app.batchfile.job import BatchJob
from app.batch.types import BatchRequest, RequestDone
from app.engine.errors import EngineError
from app.engine.events import Finished
from app.engine.loader import LoadedModel
from app.engine.sampling import GenerationSettings

log = logging.getLogger("llamadesk.ui.batch")
_online_ids = itertools.count(1)


@dataclass
class BatchSpec:
    input_path: str
    output_path: str
    n_slots: int
    defaults: GenerationSettings
    model: LoadedModel
    model_name: str
    slot_ctx: int = DEFAULT_SLOT_CTX


class BatchWorker(QObject):
    event = Signal(object)  # BatchProgress / RequestStarted / RequestDone
    started = Signal(int, int)  # requests to decode, skipped (already in the output)
    finished = Signal(object)  # JobSummary
    failed = Signal(str)  # one line: bad input, no context

    def __init__(self) -> None:
        super().__init__()
        self.engine: BatchEngine | None = None
        self.lock = threading.Lock()
        self.cancelled = False
        self.accepting = False  # chat turns may be routed here
        self.online: dict[str, tuple[object, object]] = {}  # custom_id -> (chat Job, EngineWorker)
        # The engine's counts include chat turns; the panel subtracts these to show the batch alone.
        self.online_submitted = 0
        self.online_finished = 0

    @Slot(object)
    def run(self, spec: BatchSpec) -> None:
        try:
            job = BatchJob(spec.input_path, spec.output_path, spec.defaults)
            with self.lock:
                if self.cancelled:
                    return
                self.engine = BatchEngine(spec.model, spec.n_slots, spec.slot_ctx)
                self.accepting = True
            self.started.emit(len(job.todo), job.skipped)
            summary = job.run(self.engine, spec.model_name, self._sink)
            self._drain()
            self.finished.emit(summary)
        except (BatchInputError, EngineError, ValueError, OSError) as e:
            self.failed.emit(str(e))
        except Exception as e:  # noqa: BLE001 - the window must survive any batch bug
            log.exception("batch crashed")
            self.failed.emit(f"{type(e).__name__}: {e}")
        finally:
            self._fail_online("the batch stopped before this message was answered")
            if self.engine is not None:
                self.engine.free()
                self.engine = None

    def _drain(self) -> None:
        """A chat turn routed in as the batch ended still gets its answer."""
        with self.lock:
            self.accepting = False
            pending = bool(self.online) and not self.cancelled
        if pending and self.engine is not None:
            self.engine.on_event = lambda ev: isinstance(ev, RequestDone) and self.online_done(ev)
            self.engine.run()

    def _sink(self, ev) -> None:
        if isinstance(ev, RequestDone) and ev.result.stats.online:
            self.online_done(ev)  # a chat turn, not a batch result
        else:
            self.event.emit(ev)

    # -- any thread -----------------------------------------------------------
    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            self.accepting = False
            if self.engine is not None:
                self.engine.cancel()

    def route(self, job, chat_worker) -> bool:
        """Serve a chat turn (an engine_thread.Job) in the online slot; False: not running."""
        msgs = ([Msg("system", job.system)] if job.system else []) + list(job.history)
        msgs.append(Msg("user", job.user_text))
        cid = f"chat-{next(_online_ids)}"
        req = BatchRequest(cid, msgs, job.settings)
        req.on_event = lambda ev: self._online_event(cid, ev)
        with self.lock:
            if not self.accepting or self.engine is None:
                return False
            self.online[cid] = (job, chat_worker)
            self.online_submitted += 1
            self.engine.submit_online(req)
        return True

    # -- the batch thread ------------------------------------------------------
    def _online_event(self, cid: str, ev) -> None:
        entry = self.online.get(cid)
        if entry is None:
            return
        job, w = entry
        if job.cancel.is_set() and self.engine is not None:
            self.engine.cancel_request(cid)  # the chat's Stop button
        if isinstance(ev, Finished):
            with self.lock:
                self.online.pop(cid, None)
                self.online_finished += 1
            w.replied.emit(job, Reply(ev.text, ev.stats))
        else:
            w.event.emit(job.id, ev)

    def online_done(self, ev: RequestDone) -> None:
        """Online requests that never got a slot (too long, cancelled) end here."""
        with self.lock:
            entry = self.online.pop(ev.result.custom_id, None)
        if entry is not None:
            self.online_finished += 1
            job, w = entry
            err = ev.result.stats.error or "cancelled"
            w.failed.emit(job, err, "slot holds" in err)

    def _fail_online(self, message: str) -> None:
        with self.lock:
            left, self.online = list(self.online.values()), {}
            self.accepting = False
        for job, w in left:
            w.failed.emit(job, message, False)


class BatchRunner(QObject):
    """GUI-thread handle: one QThread per batch, joined on cancel or close."""

    _request_run = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.thread: QThread | None = None
        self.worker: BatchWorker | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.isRunning()

    def start(self, spec: BatchSpec, connect: Callable[[BatchWorker], None]) -> BatchWorker:
        """`connect` wires the worker's signals before it runs, so a fast failure is not missed."""
        self.join()
        self.thread = QThread()
        self.thread.setObjectName("llamadesk-batch")
        self.worker = BatchWorker()
        self.worker.moveToThread(self.thread)
        self._request_run.connect(self.worker.run)
        # Direct: the thread's loop ends as soon as run() returns, not after a GUI round trip.
        self.worker.finished.connect(self.thread.quit, Qt.ConnectionType.DirectConnection)
        self.worker.failed.connect(self.thread.quit, Qt.ConnectionType.DirectConnection)
        connect(self.worker)
        self.thread.start()
        self._request_run.emit(spec)
        return self.worker

    def pause(self) -> None:
        if self.worker is not None and self.worker.engine is not None:
            self.worker.engine.pause()

    def resume(self) -> None:
        if self.worker is not None and self.worker.engine is not None:
            self.worker.engine.resume()

    def route(self, job, chat_worker) -> bool:
        return self.running and self.worker is not None and self.worker.route(job, chat_worker)

    def join(self, timeout_s: float = 2.0) -> bool:
        """Cancel a running batch and wait for its thread; finished results are already on disk."""
        if self.thread is None:
            return True
        if self.worker is not None:
            self.worker.cancel()
        self.thread.quit()
        ok = self.thread.wait(int(timeout_s * 1000))
        if not ok:  # a context being created cannot be interrupted
            log.warning("batch thread still busy after %.1f s", timeout_s)
            ok = self.thread.wait(30_000)
        if ok:
            self._request_run.disconnect(self.worker.run)
            self.thread = None
            self.worker = None
        return ok
