"""The two Hub threads and the requests to them, one per main window.

Shared by the Models window and the first-launch panel, so a fit check the panel started
and a download the window started are stopped by the same shutdown. Searches and listings
run on llamadesk-hub, downloads on llamadesk-download: a search answers while a file comes
in. The workers' signals are forwarded to this object's, on the GUI thread, so a widget may
connect anything to them (a lambda too) and still run on the GUI thread.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.ui.models.worker import HubWorker, PullJob, PullWorker
from app.ui.threads import WorkerThread

log = logging.getLogger("llamadesk.ui.models")


class HubService(QObject):
    found = Signal(object)  # Found
    checked = Signal(object)  # Checked
    listed = Signal(object)  # Listing
    freed = Signal(str)
    failed = Signal(str, str)  # what was asked, one line
    planned = Signal(object)  # PullJob
    progress = Signal(object, str, int, int)
    done = Signal(object, str)
    paused = Signal(object, int, int)
    cancelled = Signal(object, int)
    pull_failed = Signal(object, str)

    _ask_search = Signal(str, int, int)
    _ask_check = Signal(object, int, int)
    _ask_list = Signal()
    _ask_delete = Signal(object)
    _ask_remove = Signal(object)
    _ask_discard = Signal(object)
    _ask_pull = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        h, p = HubWorker(), PullWorker()
        self.hub_thread = WorkerThread(
            "llamadesk-hub", h,
            requests=((self._ask_search, h.search), (self._ask_check, h.check),
                      (self._ask_list, h.list_library), (self._ask_delete, h.delete),
                      (self._ask_remove, h.remove_partials), (self._ask_discard, h.discard)),
            forward=((h.found, self.found), (h.checked, self.checked), (h.listed, self.listed),
                     (h.freed, self.freed), (h.failed, self.failed)),
            log=log, busy="the Hub thread is still waiting on the network after %.1f s")
        self.pull_thread = WorkerThread(
            "llamadesk-download", p, requests=((self._ask_pull, p.pull),),
            forward=((p.planned, self.planned), (p.progress, self.progress), (p.done, self.done),
                     (p.paused, self.paused), (p.cancelled, self.cancelled), (p.failed, self.pull_failed)),
            stop=self._halt, log=log, busy="the download thread is still busy after %.1f s")
        self.job: PullJob | None = None  # the download asked for last, until it ends
        for ended in (self.done, self.paused, self.cancelled, self.pull_failed):
            ended.connect(self._ended)
        self.hub_thread.start()
        self.pull_thread.start()

    def search(self, text: str, n_ctx: int, gpu_layers: int) -> None:
        self._ask_search.emit(text, n_ctx, gpu_layers)

    def check(self, specs: list[str], n_ctx: int, gpu_layers: int) -> None:
        self._ask_check.emit(list(specs), n_ctx, gpu_layers)

    def list_library(self) -> None:
        self._ask_list.emit()

    def delete(self, files: list) -> None:
        self._ask_delete.emit(list(files))

    def remove_partials(self, parts: list) -> None:
        self._ask_remove.emit(list(parts))

    def discard(self, job: PullJob) -> None:
        """Remove the partial of a download that is not running (a paused one cancelled)."""
        self._ask_discard.emit(job)

    def pull(self, spec: str, n_ctx: int, gpu_layers: int) -> PullJob:
        self.job = PullJob(spec, n_ctx, gpu_layers)
        self._ask_pull.emit(self.job)
        return self.job

    @property
    def busy(self) -> bool:
        return self.job is not None

    def _ended(self, job: PullJob, *_rest) -> None:
        if self.job is job:
            self.job = None

    def _halt(self) -> None:
        """Closing: a download pauses (its partial kept for the next session to resume)."""
        if self.job is not None:
            self.job.stop()

    def shutdown(self) -> bool:
        ok = self.pull_thread.shutdown(3.0)
        return self.hub_thread.shutdown(3.0) and ok
