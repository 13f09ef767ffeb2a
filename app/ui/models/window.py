"""The Models window: search the Hub, download with Pause / Resume / Cancel, and manage what
was downloaded.

It decides and the HubService does: a click becomes a request to a worker thread, and a
worker's answer comes back as a signal this window turns into rows and one status line.
Every failure (a 401 and its licence URL, a 404, a full disk, no network) is that one line,
coloured as an error; the window never shows a traceback. A model becomes usable only
once app.hub has checked its sha256 and renamed it into place, so the list of downloaded
models and the chat's picker never show a half-downloaded file.

Esc and the platform's Close keys (Ctrl+W) close it, as they do a dialog: it is a window
of its own, opened from the chat for a moment, and a download under way goes on without it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.engine.gguf import human_size
from app.ui.models.library_view import LibraryView
from app.ui.models.results import ResultsView
from app.ui.models.service import HubService
from app.ui.models.transfer import TransferBox
from app.ui.models.worker import Found, Listing, PullJob
from app.ui.widgets.levels import LevelLabel

COLOURED = ("error",)  # the status line's levels drawn in their colour; info is plain text


def close_keys() -> list[QKeySequence]:
    """Esc, and Close as this platform binds it (Ctrl+W among them, on every platform)."""
    keys = [QKeySequence(Qt.Key.Key_Escape), *QKeySequence.keyBindings(QKeySequence.StandardKey.Close)]
    ctrl_w = QKeySequence("Ctrl+W")
    return keys if ctrl_w in keys else [*keys, ctrl_w]


class ModelsWindow(QWidget):
    use_model = Signal(str)  # a downloaded model's path, for the chat
    library_changed = Signal()  # a model arrived or went: the picker lists it again

    def __init__(self, service: HubService, settings: Callable[[], tuple[int, int]],
                 in_use: Callable[[], str | None] = lambda: None, parent: QWidget | None = None):
        """`settings`: (context length, GPU layers) the fit is judged at; `in_use`: the chat's model."""
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Models — LlamaDesk")
        self.service, self.settings, self.in_use = service, settings, in_use
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search the Hugging Face Hub for GGUF models, e.g. gemma 3 1b it")
        self.query.returnPressed.connect(self.search)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.search)
        self.context_note = QLabel()
        self.status = LevelLabel("")
        self.status.setObjectName("models-status")
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status_level = ""
        self.results = ResultsView()
        self.transfer = TransferBox()
        self.library = LibraryView()
        self.job: PullJob | None = None  # the download shown in the transfer box
        self._build()
        self._wire()
        self.close_shortcuts = [QShortcut(keys, self, self.close) for keys in close_keys()]
        self.resize(1000, 720)

    def _build(self) -> None:
        row = QHBoxLayout()
        row.addWidget(self.query, 1)
        row.addWidget(self.search_button)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.results)
        split.addWidget(self.transfer)
        split.addWidget(self.library)
        split.setChildrenCollapsible(False)
        for i, stretch in enumerate((3, 0, 2)):
            split.setStretchFactor(i, stretch)
        col = QVBoxLayout(self)
        col.addLayout(row)
        col.addWidget(self.context_note)
        col.addWidget(self.status)
        col.addWidget(split, 1)

    def _wire(self) -> None:
        s = self.service
        s.found.connect(self._on_found)
        s.listed.connect(self._on_listed)
        s.freed.connect(self._on_freed)
        s.failed.connect(self._on_failed)
        s.planned.connect(self._on_planned)
        s.progress.connect(self._on_progress)
        s.done.connect(self._on_done)
        s.paused.connect(self._on_paused)
        s.cancelled.connect(self._on_cancelled)
        s.pull_failed.connect(self._on_pull_failed)
        self.results.download_requested.connect(self.download)
        self.transfer.pause_clicked.connect(self.pause)
        self.transfer.resume_clicked.connect(self.resume)
        self.transfer.cancel_clicked.connect(self.cancel)
        self.library.use_requested.connect(self.use_model)
        self.library.delete_requested.connect(lambda d: self.service.delete([d]))
        self.library.resume_requested.connect(self.download)
        self.library.remove_requested.connect(lambda p: self.service.remove_partials([p]))

    # -- the status line ------------------------------------------------------
    def say(self, line: str, level: str = "info") -> None:
        """One line, whole on hover: a long licence URL is cut in the window, never wrapped."""
        self.status_level = level
        self.status.set_level(level if level in COLOURED else "")
        self.status.setText(line)
        self.status.setToolTip(line)

    def refresh(self) -> None:
        """Read the library again and say what the fit is judged at."""
        n_ctx, _ = self.settings()
        self.context_note.setText(f"Fit is judged at a {n_ctx:,}-token context (Settings, Context length) "
                                  "against the memory free now.")
        self.library.in_use = self.in_use()
        self.service.list_library()

    # -- search ---------------------------------------------------------------
    def search(self, text: str | None = None) -> None:
        text = (self.query.text() if text is None or isinstance(text, bool) else text).strip()
        if not text:
            self.say("Type what to look for, e.g. a model's name.", "error")
            return
        self.query.setText(text)
        n_ctx, gpu = self.settings()
        self.search_button.setEnabled(False)
        self.say(f"Searching the Hub for {text!r}…")
        self.service.search(text, n_ctx, gpu)

    def _on_found(self, found: Found) -> None:
        self.search_button.setEnabled(True)
        self.results.show_found(found)
        self.results.set_downloads_enabled(not self.service.busy)
        n, k = len(found.repos), sum(len(r.files) for r in found.repos)
        self.say(f"{n} {'repository' if n == 1 else 'repositories'}, {k} {'file' if k == 1 else 'files'} "
                 f"for {found.text!r}" if n else f"No GGUF repositories match {found.text!r}.")

    def _on_failed(self, what: str, line: str) -> None:
        if what == "search":
            self.search_button.setEnabled(True)
        self.say(line, "error")

    def _on_freed(self, line: str) -> None:
        self.say(line)
        self.library_changed.emit()  # the picker stops listing what was deleted

    def _on_listed(self, listing: Listing) -> None:
        self.library.busy = {self.job.spec} if self.job is not None and self.service.busy else set()
        self.library.show_listing(listing)

    # -- download -------------------------------------------------------------
    def download(self, spec: str) -> PullJob | None:
        if self.service.busy:
            self.say("One download at a time: pause or cancel the one under way first.", "error")
            return None
        n_ctx, gpu = self.settings()
        self.job = self.service.pull(spec, n_ctx, gpu)
        self.transfer.started(spec)
        self._downloading(True)
        self.say(f"Downloading {spec}…")
        return self.job

    def _downloading(self, on: bool) -> None:
        self.results.set_downloads_enabled(not on)
        self.library.busy = {self.job.spec} if on and self.job is not None else set()
        self.service.list_library()

    def pause(self) -> None:
        if self.job is not None and self.transfer.state in ("planning", "running"):
            self.job.stop()
            self.transfer.pausing()

    def resume(self) -> None:
        if self.job is not None and self.transfer.state == "paused":
            self.download(self.job.spec)

    def cancel(self) -> None:
        job = self.job
        if job is None:
            return
        if self.service.job is job:  # running: it stops, then the worker removes its partial
            job.stop(cancel=True)
            self.transfer.pausing()
            return
        self.service.discard(job)
        self.transfer.ended(f"Cancelled {job.spec}: nothing of it is kept")
        self.job = None
        self._downloading(False)

    def _mine(self, job: PullJob) -> bool:
        return job is self.job

    def _on_planned(self, job: PullJob) -> None:
        if self._mine(job):
            self.transfer.planned(job)

    def _on_progress(self, job: PullJob, phase: str, done: int, total: int) -> None:
        if self._mine(job):
            self.transfer.progressed(phase, done, total)

    def _on_done(self, job: PullJob, path: str) -> None:
        if not self._mine(job):
            return
        self.transfer.finished(path)
        name = job.file.name if job.file else job.spec
        self.say(f"Downloaded {name} ({human_size(job.file.size) if job.file else ''}), sha256 checked: "
                 "Use this model below to chat with it")
        self._downloading(False)
        self.library_changed.emit()

    def _on_paused(self, job: PullJob, done: int, size: int) -> None:
        if self._mine(job) and job.cancelled:  # Cancel came after Pause, before the pause landed
            self.service.discard(job)
            self.transfer.ended(f"Cancelled {job.spec}: nothing of it is kept")
            self.job = None
            self._downloading(False)
        elif self._mine(job):
            self.transfer.paused(done, size)
            self.say(f"Paused {job.spec} at {human_size(done)} of {human_size(size)}")
            self._downloading(False)

    def _on_cancelled(self, job: PullJob, freed: int) -> None:
        if self._mine(job):
            line = f"Cancelled {job.spec}: its partial download is removed ({human_size(freed)} freed)"
            self.transfer.ended(line)
            self.say(line)
            self.job = None
            self._downloading(False)

    def _on_pull_failed(self, job: PullJob, line: str) -> None:
        if self._mine(job):
            self.transfer.ended(line)
            self.say(line, "error")
            self.job = None
            self._downloading(False)

    # -- closing --------------------------------------------------------------
    def showEvent(self, ev) -> None:
        super().showEvent(ev)
        self.refresh()
