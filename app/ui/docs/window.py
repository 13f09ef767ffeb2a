"""The Collections window: folders indexed once, for any conversation to search (LocalDocs' idea).

A folder is indexed under a name off the GUI thread (app.ui.docs.worker), with
a bar that counts its files and a line with its pages and the file being read,
and a Cancel that stops it between two files (what was indexed stays: a
re-index goes on from there, skipping what is unchanged). The list says of
each collection its folder, files, pages, and the files deleted since it was
indexed; Re-index reads the folder again (only what changed, by mtime and
hash), Remove drops the index (never the files).

`llamadesk docs add DIR --name NAME` does the same through the same function,
so a collection made either way is the other's.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.docs.index import DocsIndex
from app.ui.docs.worker import DocsService, IndexJob, one_line

COLUMNS = ("Name", "Folder", "Files", "Pages", "Missing", "Indexed")


def _count(v) -> int:
    """A count the index gives as a number or as the list it counts."""
    return len(v) if isinstance(v, (list, tuple, set)) else int(v or 0)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "never"


class CollectionsWindow(QWidget):
    changed = Signal(list)  # the collections' names, after an index, a re-index or a removal
    indexed = Signal(str)  # a collection finished indexing (not cancelled)

    def __init__(self, index_path: Path | None = None, parent=None):
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Collections")
        self.resize(760, 460)
        self.index_path = index_path  # None: the default docs.db
        self.service = DocsService("llamadesk-collections", self)
        self.service.progress.connect(self._on_progress)
        self.service.indexed.connect(self._on_indexed)
        self.service.index_failed.connect(self._on_failed)
        self.job: IndexJob | None = None
        self.last_report = None
        self.name = QLineEdit()
        self.name.setPlaceholderText("Name (e.g. handbook)")
        self.folder = QLineEdit()
        self.folder.setPlaceholderText("Folder to index")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.add_button = QPushButton("Add folder")
        self.add_button.setToolTip("Index the folder's documents under this name (PDF, DOCX, HTML, "
                                   "Markdown, text, code); any conversation can then use them")
        self.add_button.clicked.connect(lambda: self.add_folder(self.folder.text(), self.name.text()))
        add = QHBoxLayout()
        add.addWidget(QLabel("Name"))
        add.addWidget(self.name, 1)
        add.addWidget(QLabel("Folder"))
        add.addWidget(self.folder, 2)
        add.addWidget(browse)
        add.addWidget(self.add_button)
        self.bar = QProgressBar()
        self.bar.setTextVisible(True)
        self.progress_line = QLabel()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        prog = QHBoxLayout()
        prog.addWidget(self.bar, 1)
        prog.addWidget(self.cancel_button)
        self.progress_box = QWidget()
        pcol = QVBoxLayout(self.progress_box)
        pcol.setContentsMargins(0, 0, 0, 0)
        pcol.addLayout(prog)
        pcol.addWidget(self.progress_line)
        self.progress_box.setVisible(False)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        head = self.table.horizontalHeader()
        for k in range(len(COLUMNS)):
            head.setSectionResizeMode(k, QHeaderView.ResizeMode.Stretch if k == 1
                                      else QHeaderView.ResizeMode.ResizeToContents)
        self.reindex_button = QPushButton("Re-index")
        self.reindex_button.setToolTip("Read the folder again: new and changed files are indexed, "
                                       "deleted ones dropped and named")
        self.reindex_button.clicked.connect(self.reindex_selected)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Drop this collection's index (the files are not touched)")
        self.remove_button.clicked.connect(self.remove_selected)
        self.status = QLabel()
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.reindex_button)
        buttons.addWidget(self.remove_button)
        col = QVBoxLayout(self)
        col.addLayout(add)
        col.addWidget(self.progress_box)
        col.addWidget(self.table, 1)
        col.addLayout(buttons)
        self.infos: list = []
        self.refresh()

    # -- the list ---------------------------------------------------------------
    def _open(self) -> DocsIndex:
        return DocsIndex.open(self.index_path)

    def names(self) -> list[str]:
        return [c.name for c in self.infos]

    def refresh(self) -> None:
        try:
            with self._open() as index:
                self.infos = list(index.collections())
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.infos = []
            self.status.setText(f"Cannot read the collections: {one_line(e)}")
        self.table.setRowCount(len(self.infos))
        for r, c in enumerate(self.infos):
            missing = _count(getattr(c, "missing", 0))
            cells = (c.name, str(c.root), f"{_count(c.files):,}", f"{_count(c.pages):,}",
                     f"{missing:,}" if missing else "", _when(getattr(c, "indexed_at", None)))
            for k, v in enumerate(cells):
                item = QTableWidgetItem(v)
                if k == 4 and missing:
                    item.setToolTip(f"{missing:,} file(s) deleted from the folder since it was indexed: "
                                    "Re-index drops them")
                self.table.setItem(r, k, item)
        self._enable()

    def _selected(self):
        rows = self.table.selectionModel().selectedRows()
        return self.infos[rows[0].row()] if rows else None

    def _enable(self) -> None:
        idle = self.job is None
        self.add_button.setEnabled(idle)
        self.reindex_button.setEnabled(idle and bool(self.infos))
        self.remove_button.setEnabled(idle and bool(self.infos))

    # -- indexing -----------------------------------------------------------------
    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Folder to index", self.folder.text())
        if d:
            self.folder.setText(d)
            if not self.name.text().strip():
                self.name.setText(Path(d).name)

    def add_folder(self, folder: str | Path, name: str = "") -> IndexJob | None:
        """Index `folder` as collection `name` (its folder's name when empty); None: refused,
        and the window's status line says why."""
        root = Path(str(folder)).expanduser() if str(folder).strip() else None
        if root is None or not root.is_dir():
            self.status.setText(f"Not a folder: {folder}" if root else "Choose a folder to index.")
            return None
        name = name.strip() or root.name
        if self.job is not None:
            self.status.setText(f"«{self.job.name}» is being indexed: wait for it or cancel it.")
            return None
        self.folder.setText(str(root))
        self.name.setText(name)
        self.job = self.service.index(IndexJob(root, name, self.index_path))
        self.bar.setRange(0, 0)  # busy until the first count
        self.progress_line.setText(f"Looking for documents in {root}…")
        self.progress_box.setVisible(True)
        self.cancel_button.setEnabled(True)
        self.status.setText("")
        self._enable()
        return self.job

    def reindex_selected(self) -> IndexJob | None:
        c = self._selected() or (self.infos[0] if len(self.infos) == 1 else None)
        if c is None:
            self.status.setText("Choose a collection to re-index.")
            return None
        return self.add_folder(c.root, c.name)

    def remove_selected(self) -> None:
        c = self._selected()
        if c is None:
            self.status.setText("Choose a collection to remove.")
            return
        try:
            with self._open() as index:
                index.remove_collection(c.name)
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.status.setText(f"Could not remove «{c.name}»: {one_line(e)}")
            return
        self.status.setText(f"Removed «{c.name}» (its files are untouched).")
        self.refresh()
        self.changed.emit(self.names())

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel.set()
            self.cancel_button.setEnabled(False)
            self.progress_line.setText(self.progress_line.text() + " · cancelling…")

    def _on_progress(self, job: IndexJob, p) -> None:
        if job is not self.job or job.cancel.is_set():
            return
        self.bar.setRange(0, max(p.files_total, 1))
        self.bar.setValue(p.files_done)
        self.bar.setFormat(f"{p.files_done:,} / {p.files_total:,} files")
        current = f" · {Path(p.current).name}" if p.current else ""
        self.progress_line.setText(f"«{job.name}»: {p.files_done:,} of {p.files_total:,} files · "
                                   f"{p.pages:,} pages{current}")

    def _on_indexed(self, job: IndexJob, report) -> None:
        if job is not self.job:
            return
        self.last_report = report
        failed = [f"{Path(p).name}: {why}" for p, why in report.failed]
        parts = [f"{report.added:,} added", f"{report.updated:,} updated", f"{report.unchanged:,} unchanged"]
        if report.deleted:
            gone = ", ".join(Path(d).name for d in report.deleted[:3])
            gone += "…" if len(report.deleted) > 3 else ""
            parts.append(f"{len(report.deleted):,} deleted since ({gone})")
        if failed:
            parts.append(f"{len(failed):,} not read ({failed[0]}" + ("; …" if len(failed) > 1 else "") + ")")
        stopped = job.cancel.is_set() or bool(getattr(report, "cancelled", False))
        head = f"Cancelled «{job.name}»: what was indexed stays" if stopped else f"Indexed «{job.name}»"
        self._done(f"{head}: " + ", ".join(parts) + ".")
        if not stopped:
            self.indexed.emit(job.name)

    def _on_failed(self, job: IndexJob, line: str) -> None:
        if job is self.job:
            self._done(f"Could not index «{job.name}»: {line}")

    def _done(self, line: str) -> None:
        self.job = None
        self.progress_box.setVisible(False)
        self.status.setText(line)
        self.refresh()
        self.changed.emit(self.names())

    def shutdown(self) -> None:
        if self.job is not None:
            self.job.cancel.set()
        self.service.shutdown()

    def closeEvent(self, ev) -> None:  # hiding it keeps an index going; the window's shutdown ends it
        super().closeEvent(ev)
