"""A worker QObject on a QThread of its own, and the order it is stopped in.

The window's long work runs this way: the chat's engine (chat/engine_thread.py),
a batch (batch/worker.py) and a comparison (compare/window.py). The worker
lives on the thread and never touches a widget; the GUI asks it for work
through queued signals and hears back through the worker's signals, which Qt
queues to the GUI thread. Written once here so the three cannot drift apart in
the part that is easy to get wrong: the shutdown.

The order of a shutdown matters (qasync issue 115: quitting must never hang on
a reply still decoding). First the work is told to stop, through something the
GUI sets directly (a CancelToken, a stopping flag), never a queued request,
which would wait behind the very work it means to stop. Then the GUI stops
listening, then the thread's loop is told to quit and is waited for. A model
load or a context being created cannot be interrupted inside llama.cpp, so a
thread still busy after the first wait is logged and given longer.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, Qt, QThread, SignalInstance


class WorkerThread(QThread):
    """`worker` moved onto this (named) thread, its requests connected; `start()` when wired.

    `requests`: (GUI-side signal, worker slot) pairs, queued, so calls run on
    this thread in the order they were made. `forward`: (worker signal,
    GUI-side signal) pairs the GUI stops hearing once shutdown begins.
    `quit_on`: worker signals that end the thread's loop the moment they are
    emitted (direct, on this thread: no round trip through the GUI). `stop`
    tells the work to stop; `log` and `busy` (a %-format taking the seconds
    waited) say so when the first wait was not enough.
    """

    def __init__(self, name: str, worker: QObject, *,
                 requests: Iterable[tuple[SignalInstance, Callable[..., object]]] = (),
                 forward: Iterable[tuple[SignalInstance, SignalInstance]] = (),
                 quit_on: Iterable[SignalInstance] = (),
                 stop: Callable[[], None] | None = None,
                 log: logging.Logger | None = None, busy: str = "") -> None:
        super().__init__()
        self.setObjectName(name)
        self.worker = worker
        worker.moveToThread(self)
        self._requests = list(requests)
        self._forward = list(forward)
        for signal, slot in self._requests:
            signal.connect(slot, Qt.ConnectionType.QueuedConnection)
        for src, dst in self._forward:
            src.connect(dst)
        for signal in quit_on:
            signal.connect(self.quit, Qt.ConnectionType.DirectConnection)
        self._stop = stop
        self._log, self._busy = log, busy
        self._cut = False

    def shutdown(self, timeout_s: float = 2.0, patience_s: float = 30.0) -> bool:
        """Stop the work, stop listening, end the thread; True once it has ended. Safe to call
        twice. `patience_s`: how much longer to wait after `timeout_s` (0: not at all)."""
        if self._stop is not None:
            self._stop()
        self._cut_off()
        self.quit()
        ok = self.wait(int(timeout_s * 1000))
        if not ok and patience_s > 0:
            if self._log is not None and self._busy:
                self._log.warning(self._busy, timeout_s)
            ok = self.wait(int(patience_s * 1000))
        return ok

    def _cut_off(self) -> None:
        if self._cut:
            return
        self._cut = True
        for signal, target in (*self._forward, *self._requests):
            with warnings.catch_warnings():  # PySide warns when the connection is already gone
                warnings.simplefilter("ignore")
                try:
                    signal.disconnect(target)
                except (RuntimeError, TypeError):
                    pass
