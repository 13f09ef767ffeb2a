"""The Compare window's thread worker: one comparison at a time, off the GUI thread.

Each local target is loaded on this thread, alone, and freed before the next
(app.compare.run); the window only hears progress, the finished Comparison
or one line saying why it stopped.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot


class CompareWorker(QObject):
    progress = Signal(str, int, int)
    finished = Signal(object)  # Comparison
    failed = Signal(str)

    @Slot(object)
    def run(self, job) -> None:
        from app.compare.run import run_comparison

        targets, prompts, settings, repeat, cancel = job
        try:
            self.finished.emit(run_comparison(targets, prompts, settings, repeat, True,
                                              lambda *a: self.progress.emit(*a), cancel))
        except Exception as e:  # noqa: BLE001 - the window must survive any bug of a run
            self.failed.emit(f"{type(e).__name__}: {e}")
