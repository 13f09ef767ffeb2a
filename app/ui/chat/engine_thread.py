"""The chat's engine thread, which owns the LocalChatEngine, and the GUI-side handle to it.

A llama context is used by exactly one thread (the rule is in app/engine's
docstring), and a decode step must never run on the GUI thread, so every call
on the chat's context happens in EngineWorker's slots on a dedicated QThread.
The worker never touches widgets: it only emits signals, which Qt queues to
the GUI thread. Requests go the other way as queued signals too, so calls are
serialized in the order they were made. The loaded weights travel to the GUI
thread only as a handle in `Loaded`, for the batch thread to build its own
context on; the GUI thread never calls them.

Stopping does not wait for the queue: CancelToken is a threading.Event the
GUI sets directly, and the decode loop checks it every token (and llama.cpp's
abort callback checks it during prefill).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot

from app.chat.engines import EngineTarget, ReplyEngine, WhereItRuns, open_engine
from app.chat.local_engine import LocalChatEngine
from app.chat.thinking_controls import ThinkingControls
from app.engine.control import CancelToken
from app.engine.errors import ContextOverflowError
from app.engine.loader import LoadedModel
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.engine.utilization import Limits, limits_for
from app.errors import LlamaDeskError
from app.openai_compat.tools import ToolCalls
from app.ui.threads import WorkerThread

log = logging.getLogger("llamadesk.ui.engine")
_ids = itertools.count(1)


class _Shutdown(Exception):
    """Raised from the default-model assembly progress callback to abandon it."""


@dataclass
class Loaded:
    path: str
    report: WhereItRuns  # a LoadReport, or a server's RemoteReport
    notice: str | None
    n_ctx: int
    identity: dict  # ReplyEngine.identity(): what a saved conversation records as the model
    # The shared weights (None: a server's); only another thread's own context may use them.
    model: LoadedModel | None
    limits: Limits | None = None  # the bandwidth gauge (None: a server, a GPU)
    notes: tuple[str, ...] = ()  # ReplyEngine.notes: one-line warnings about this setup, shown once
    thinking: ThinkingControls | None = None  # a thinking template's switches (None: it has none)


@dataclass
class Job:
    history: list[MessageBody]
    user_text: str | None  # None: the reply after tool results (the history ends with them)
    settings: GenerationSettings
    system: str | None
    cancel: CancelToken = field(default_factory=CancelToken)
    id: int = field(default_factory=lambda: next(_ids))
    tools: ToolCalls | None = None  # what the reply may call
    round: int = 0  # the reply's place in its turn: 0 first, then one more after each set of results

    @property
    def with_tools(self) -> bool:
        """A turn with tool calls anywhere in it: answered by the chat's own engine, which writes
        them in the tool format (a Batch or Serve slot would be given the bare text)."""
        return (self.tools is not None or self.user_text is None
                or any(m.tool_calls or m.role == "tool" for m in self.history))


class EngineWorker(QObject):
    load_progress = Signal(int, int)  # bytes done, total (default model assembly)
    loaded = Signal(object)  # Loaded
    load_failed = Signal(str)
    reply_event = Signal(object, object)  # job id, an engine event of that reply
    replied = Signal(object, object)  # Job, Reply
    failed = Signal(object, str, bool)  # Job, message, is a context overflow

    def __init__(self) -> None:
        super().__init__()
        self.engine: ReplyEngine | None = None
        self.stopping = False

    @Slot(object)
    def load(self, target: EngineTarget) -> None:
        self.close_engine()  # free the old model's memory before loading the next
        def progress(done: int, total: int) -> None:
            if self.stopping:
                raise _Shutdown
            self.load_progress.emit(done, total)
        try:  # a server's HTTP probe and keyring read run here too, never on the GUI thread
            eng = open_engine(target, progress)
        except _Shutdown:
            return
        except (LlamaDeskError, ValueError, OSError) as e:
            self.load_failed.emit(str(e))
            return
        except Exception as e:
            log.exception("model load crashed")
            self.load_failed.emit(f"{type(e).__name__}: {e}")
            return
        if self.stopping:
            eng.close()
            return
        if eng.limits is not None and eng.limits.mac_peak is None and isinstance(eng, LocalChatEngine):
            # The compute roof, once per machine, library and thread count (then cached): a
            # 512-token batch through the model, here, before the gauges first need it.
            eng.limits = limits_for(eng.model, compute=True)
        self.engine = eng
        where = (target.endpoint.base_url if target.endpoint
                 else str(Path(target.path or eng.report.model_path)))
        self.loaded.emit(Loaded(where, eng.report, eng.notice, eng.n_ctx or 0, eng.identity(), eng.weights,
                                eng.limits, tuple(eng.notes), ThinkingControls.of(eng)))

    @Slot(object)
    def generate(self, job: Job) -> None:
        if self.engine is None:
            self.failed.emit(job, "no model is loaded", False)
            return
        jid = job.id
        emit = self.reply_event.emit
        try:
            reply = self.engine.reply(job.history, job.user_text, job.settings, job.system,
                                      on_event=lambda ev: emit(jid, ev), cancel=job.cancel, tools=job.tools)
        except ContextOverflowError as e:
            self.failed.emit(job, str(e), True)
        except (LlamaDeskError, ValueError) as e:
            self.failed.emit(job, str(e), False)
        except Exception as e:
            log.exception("reply crashed")
            self.failed.emit(job, f"{type(e).__name__}: {e}", False)
        else:
            self.replied.emit(job, reply)

    @Slot()
    def prepare(self) -> None:
        """Build what a constrained reply needs while nothing waits for it; a failure is left to
        the reply that needs it, which says it in its own words."""
        if self.engine is None:
            return
        try:
            self.engine.prepare_constraints()
        except Exception:
            log.exception("preparing constrained replies failed")

    def close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class ChatRouter(Protocol):
    """Something that may answer a chat turn instead of the engine thread (the Batch
    window's online slot) and reports it through signals shaped like the worker's."""

    chat_event: SignalInstance
    chat_replied: SignalInstance
    chat_failed: SignalInstance

    def route(self, job: Job) -> bool: ...


class EngineBridge(QObject):
    """GUI-thread handle: owns the worker thread, forwards requests, shuts down.

    Its signals carry every chat turn's events, whoever answered it (this
    thread or the router), so the chat flow listens in one place.
    """

    loaded = Signal(object)  # Loaded
    load_failed = Signal(str)
    load_progress = Signal(int, int)
    reply_event = Signal(object, object)  # job id, an engine event of that reply
    replied = Signal(object, object)  # Job, Reply
    failed = Signal(object, str, bool)  # Job, message, is a context overflow
    _request_load = Signal(object)
    _request_generate = Signal(object)
    _request_prepare = Signal()

    def __init__(self, router: ChatRouter | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker = w = EngineWorker()
        self.engine_thread = WorkerThread(
            "llamadesk-engine", w,
            requests=((self._request_load, w.load), (self._request_generate, w.generate),
                      (self._request_prepare, w.prepare)),
            forward=((w.loaded, self.loaded), (w.load_failed, self.load_failed),
                     (w.load_progress, self.load_progress), (w.reply_event, self.reply_event),
                     (w.replied, self.replied), (w.failed, self.failed)),
            stop=self._stop_work, log=log, busy="engine thread still busy after %.1f s; waiting for the load")
        self.routers: list[ChatRouter] = []
        if router is not None:
            self.add_router(router)
        self.current: Job | None = None
        self.engine_thread.start()

    def load(self, target: EngineTarget) -> None:
        self.stop()
        self._request_load.emit(target)

    def add_router(self, router: ChatRouter) -> None:
        """Routers are asked in order (the Batch window's online slot, then the server's)."""
        router.chat_event.connect(self.reply_event)
        router.chat_replied.connect(self.replied)
        router.chat_failed.connect(self.failed)
        self.routers.append(router)

    def submit(self, job: Job) -> Job:
        self.current = job
        if job.with_tools or not any(r.route(job) for r in self.routers):
            self._request_generate.emit(job)
        return job

    def prepare(self) -> None:
        """Have the engine thread index the model's vocabulary for constrained replies now (a
        reply format or tools were chosen): queued, so a reply sent meanwhile waits its turn."""
        self._request_prepare.emit()

    def stop(self) -> None:
        if self.current is not None:
            self.current.cancel.cancel()

    def job_done(self, job: Job) -> None:
        if self.current is job:
            self.current = None

    def _stop_work(self) -> None:
        self.worker.stopping = True  # a load gives up at its next progress report, or frees its model
        self.stop()

    def shutdown(self, timeout_s: float = 2.0) -> bool:
        """Stop the reply, end the thread, free the model. Safe to call twice.

        The order matters (qasync issue 115): the running job is told to stop
        before anything waits for the thread, so quitting never hangs on a
        reply that is still decoding. Only a model load (not interruptible
        inside llama.cpp) outlasts `timeout_s`; it is waited for (threads.py).
        """
        ok = self.engine_thread.shutdown(timeout_s)
        if ok:
            self.worker.close_engine()
        return ok
