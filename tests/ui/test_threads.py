"""WorkerThread's shutdown order without a model: the work is told to stop before anything waits,
the GUI stops hearing the worker, and a worker that cannot be interrupted is logged and waited for."""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal, Slot

from app.ui.threads import WorkerThread


class _Sleeper(QObject):
    said = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.began = threading.Event()
        self.ran_on: str | None = None

    @Slot(float)
    def work(self, hold_s: float) -> None:
        """Busy until released or `hold_s` passes, like a load llama.cpp cannot interrupt."""
        self.ran_on = threading.current_thread().name
        self.began.set()
        self.release.wait(hold_s)
        self.said.emit("done")


class _Gui(QObject):
    ask = Signal(float)
    heard = Signal(str)


def test_requests_run_on_the_named_thread_and_stop_comes_before_the_wait(qtbot):
    gui, worker = _Gui(), _Sleeper()
    order: list[str] = []
    t = WorkerThread("llamadesk-test", worker, requests=((gui.ask, worker.work),),
                     forward=((worker.said, gui.heard),),
                     stop=lambda: (order.append("stop"), worker.release.set()))
    t.start()
    gui.ask.emit(30.0)
    assert worker.began.wait(5)
    assert t.objectName() == "llamadesk-test" and worker.thread() is t
    assert t.shutdown(2.0)  # returns at once: the stop released the work first
    assert order == ["stop"] and t.isFinished()
    heard: list[str] = []
    gui.heard.connect(heard.append)
    worker.said.emit("late")  # cut off: the GUI no longer hears the worker
    assert heard == [] and t.shutdown(0.1), "a second shutdown is harmless"


def test_work_that_outlasts_the_first_wait_is_logged_and_waited_for(qtbot, caplog):
    gui, worker = _Gui(), _Sleeper()
    log = logging.getLogger("llamadesk.ui.test")
    t = WorkerThread("llamadesk-test", worker, requests=((gui.ask, worker.work),), log=log,
                     busy="test thread still busy after %.1f s")
    t.start()
    gui.ask.emit(1.0)  # nothing can stop it: it ends by itself
    assert worker.began.wait(5)
    with caplog.at_level(logging.WARNING, "llamadesk.ui.test"):
        assert t.shutdown(0.2, patience_s=10)
    assert [r.getMessage() for r in caplog.records] == ["test thread still busy after 0.2 s"]
    assert worker.ran_on != threading.main_thread().name
