"""Reading documents off the GUI thread: a file attached to a chat, and a folder indexed as a collection.

Both can take seconds (a long PDF's text layer, a folder of a thousand files),
so each DocsService runs its work on a WorkerThread of its own (app.ui.threads),
as the Models window runs its searches and downloads. The worker calls the
same functions `llamadesk ask --attach` and `llamadesk docs add` call
(app.chat.documents.attach, app.docs.collections.index_folder), so the window
and the command line read a file alike and fail on it in the same one line.

An index job is stopped through the threading.Event it carries, which the GUI
sets directly (Cancel, closing the window): index_folder checks it between
files, so a cancel never waits behind the folder it means to stop. The index
is opened on the worker's own thread for each job, since a SQLite connection
belongs to the thread that made it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.chat.documents import attach
from app.docs.collections import index_folder
from app.docs.index import DocsIndex
from app.errors import LlamaDeskError
from app.ui.threads import WorkerThread

log = logging.getLogger("llamadesk.ui.docs")


def one_line(e: BaseException) -> str:
    """A failure as the message bar shows it: its first line, never a traceback."""
    if isinstance(e, OSError):
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror or type(e).__name__}{where}"
    text = str(e).splitlines()[0] if str(e) else ""
    if not isinstance(e, LlamaDeskError):
        log.error("unexpected failure reading documents", exc_info=e)
        return f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text or type(e).__name__


@dataclass
class IndexJob:
    """A folder to index as collection `name`; `cancel` is set by the GUI."""

    root: Path
    name: str
    index_path: Path | None = None  # None: the default docs.db
    cancel: threading.Event = field(default_factory=threading.Event)


class DocsWorker(QObject):
    attached = Signal(object, object)  # Attachment, Extracted
    attach_failed = Signal(str, str)  # the path, one line
    progress = Signal(object, object)  # IndexJob, app.docs.collections.Progress
    indexed = Signal(object, object)  # IndexJob, Report
    index_failed = Signal(object, str)  # IndexJob, one line

    def __init__(self, index_path: Path | None = None) -> None:
        super().__init__()
        self.index_path = index_path

    @Slot(str)
    def attach(self, path: str) -> None:
        try:
            att, ex = attach(path)
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.attach_failed.emit(path, one_line(e))
            return
        self._preindex(ex)
        self.attached.emit(att, ex)

    def _preindex(self, ex) -> None:
        """Cut and index the text now, off the GUI thread: a question that must retrieve from it
        then only searches (the index keeps a text once by hash). A failure here is the plan's to
        say, when it needs the index."""
        try:
            with DocsIndex.open(self.index_path) as index:
                index.add(ex)
        except Exception as e:  # noqa: BLE001 - said by the turn that needs the index, if one does
            log.warning("could not index %s ahead of its question: %s", ex.name, one_line(e))

    @Slot(object)
    def index(self, job: IndexJob) -> None:
        try:
            with DocsIndex.open(job.index_path) as index:
                report = index_folder(index, job.root, job.name, cancel=job.cancel,
                                      progress=lambda p: self.progress.emit(job, p))
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.index_failed.emit(job, one_line(e))
            return
        self.indexed.emit(job, report)


class DocsService(QObject):
    """The GUI's handle: ask, hear back (on the GUI thread), shut down with the window."""

    attached = Signal(object, object)
    attach_failed = Signal(str, str)
    progress = Signal(object, object)
    indexed = Signal(object, object)
    index_failed = Signal(object, str)
    _ask_attach = Signal(str)
    _ask_index = Signal(object)

    def __init__(self, name: str = "llamadesk-docs", parent: QObject | None = None,
                 index_path: Path | None = None) -> None:
        super().__init__(parent)
        self.worker = w = DocsWorker(index_path)
        self.jobs: list[IndexJob] = []  # asked and not ended, to cancel on shutdown
        self.worker_thread = WorkerThread(
            name, w, requests=((self._ask_attach, w.attach), (self._ask_index, w.index)),
            forward=((w.attached, self.attached), (w.attach_failed, self.attach_failed),
                     (w.progress, self.progress), (w.indexed, self.indexed),
                     (w.index_failed, self.index_failed)),
            stop=self._cancel_all, log=log, busy="the documents thread is still reading after %.1f s")
        self.indexed.connect(self._ended)
        self.index_failed.connect(self._ended)
        self.worker_thread.start()

    def attach(self, path: str | Path) -> None:
        self._ask_attach.emit(str(path))

    def index(self, job: IndexJob) -> IndexJob:
        self.jobs.append(job)
        self._ask_index.emit(job)
        return job

    def _ended(self, job: IndexJob, _what: object) -> None:
        if job in self.jobs:
            self.jobs.remove(job)

    def _cancel_all(self) -> None:
        for job in self.jobs:
            job.cancel.set()

    def shutdown(self, timeout_s: float = 2.0) -> bool:
        return self.worker_thread.shutdown(timeout_s)
