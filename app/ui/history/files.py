"""Export and import on the llamadesk-history-files thread, one at a time.

Their file work may wait on the disk (a slow network share, a FIFO, a USB
stick waking up) and an import's transcript may be large: on the GUI thread
either would freeze the window. So they run as every other worker does
(app/ui/threads.py): a worker on a named thread, asked through queued
signals, answering through signals this object forwards to the GUI thread.
The store is safe from any thread (one lock around one connection); the
window shuts this down before it closes the store, so a request in flight
finishes on an open store.

The thread starts with the first export or import: most windows never need it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.history import export as exporter
from app.history import transcript
from app.history.errors import StoreError
from app.history.store import Store
from app.ui.threads import WorkerThread

log = logging.getLogger("llamadesk.ui.history")
EXPORT, IMPORT = "Export", "Import"


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


class FilesWorker(QObject):
    """Lives on the files thread; never touches a widget."""

    exported = Signal(object)  # the Path written
    imported = Signal(int, str)  # the new conversation's id, the file read
    failed = Signal(str, str)  # EXPORT or IMPORT, one line

    @Slot(object, int, str)
    def export(self, store: Store, conv_id: int, path: str) -> None:
        self._attempt(EXPORT, lambda: exporter.export(store.get_conversation(conv_id), path),
                      self.exported.emit)

    @Slot(object, str)
    def import_(self, store: Store, path: str) -> None:
        self._attempt(IMPORT, lambda: store.import_conversation(transcript.load(path)),
                      lambda conv_id: self.imported.emit(conv_id, path))

    def _attempt(self, kind: str, work: Callable[[], object], done: Callable[[object], None]) -> None:
        try:
            result = work()
        except (StoreError, ValueError, OSError) as e:
            self.failed.emit(kind, one_line(e))
        except Exception as e:  # a bug must reach the message bar, not end the thread
            log.exception("%s crashed", kind.lower())
            self.failed.emit(kind, f"{type(e).__name__}: {one_line(e)}")
        else:
            done(result)


class HistoryFiles(QObject):
    """The GUI's side: `busy` names the export or import running, until its answer arrives."""

    exported = Signal(object)
    imported = Signal(int, str)
    failed = Signal(str, str)

    _ask_export = Signal(object, int, str)
    _ask_import = Signal(object, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.files_thread: WorkerThread | None = None
        self.busy: str | None = None  # EXPORT or IMPORT while one runs
        self._closed = False
        for ended in (self.exported, self.imported, self.failed):
            ended.connect(self._ended)

    def export(self, store: Store, conv_id: int, path: str | Path) -> bool:
        """False, asking nothing, while another export or import runs or after shutdown."""
        if not self._claim(EXPORT):
            return False
        self._ask_export.emit(store, conv_id, str(path))
        return True

    def import_(self, store: Store, path: str | Path) -> bool:
        if not self._claim(IMPORT):
            return False
        self._ask_import.emit(store, str(path))
        return True

    def _claim(self, what: str) -> bool:
        if self.busy is not None or self._closed:
            return False
        if self.files_thread is None:
            w = FilesWorker()
            self.files_thread = WorkerThread(
                "llamadesk-history-files", w,
                requests=((self._ask_export, w.export), (self._ask_import, w.import_)),
                forward=((w.exported, self.exported), (w.imported, self.imported), (w.failed, self.failed)),
                log=log, busy="an export or import is still writing after %.1f s")
            self.files_thread.start()
        self.busy = what
        return True

    def _ended(self, *_answer) -> None:
        self.busy = None

    def shutdown(self) -> bool:
        """Let a file in progress finish (it is written whole or not at all), then end the thread."""
        self._closed = True
        return self.files_thread is None or self.files_thread.shutdown(3.0)
