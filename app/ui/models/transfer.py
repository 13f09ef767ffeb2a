"""The download under way: which file, a progress bar, bytes, rate and time left, and Pause /
Resume / Cancel.

Only shows; the Models window decides what a click does (halt the job, ask for it again,
remove its partial). The sha256 check after the transfer has its own phase on the bar,
since hashing a multi-gigabyte file takes long enough to look like a hang otherwise.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout

from app.engine.gguf import human_size
from app.ui.models.labels import RateMeter, fit_text, transfer_text
from app.ui.models.worker import PullJob

SCALE = 1000  # the bar counts thousandths: a QProgressBar's int cannot hold a file's bytes


class TransferBox(QGroupBox):
    pause_clicked = Signal()
    resume_clicked = Signal()
    cancel_clicked = Signal()

    def __init__(self, parent=None):
        super().__init__("Download", parent)
        self.what = QLabel("Nothing is downloading. Search above, then Download a file.")
        self.what.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, SCALE)
        self.bar.setValue(0)
        self.detail = QLabel("")
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self._pause_or_resume)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop and remove what was downloaded of this file")
        self.cancel_button.clicked.connect(self.cancel_clicked)
        row = QHBoxLayout()
        row.addWidget(self.bar, 1)
        row.addWidget(self.pause_button)
        row.addWidget(self.cancel_button)
        col = QVBoxLayout(self)
        col.addWidget(self.what)
        col.addLayout(row)
        col.addWidget(self.detail)
        self.meter = RateMeter()
        self.state = "idle"  # idle, planning, running, pausing, paused, done, failed
        self._buttons()

    def _pause_or_resume(self) -> None:
        if self.state == "paused":
            self.resume_clicked.emit()
        else:
            self.pause_clicked.emit()

    def _buttons(self) -> None:
        active = self.state in ("planning", "running", "pausing", "paused")
        self.pause_button.setText("Resume" if self.state == "paused" else "Pause")
        self.pause_button.setEnabled(self.state in ("planning", "running", "paused"))
        self.cancel_button.setEnabled(active)

    def _set(self, state: str) -> None:
        self.state = state
        self._buttons()

    def started(self, spec: str) -> None:
        self.meter.reset()
        self.what.setText(f"<b>{spec}</b>: asking the Hub for the file and its header…")
        self.bar.setRange(0, 0)  # busy until the first bytes
        self.detail.setText("")
        self._set("planning")

    def planned(self, job: PullJob) -> None:
        f = job.file
        if f is None:
            return
        fit = f" · {fit_text(job.fit.label, job.fit.ram_needed, job.fit.ram_free)}" if job.fit else ""
        self.what.setText(f"<b>{f.repo}</b> / {f.name} · {human_size(f.size)}{fit}")
        self.bar.setRange(0, SCALE)
        self.bar.setValue(int(SCALE * job.resumed_at / max(f.size, 1)))
        if job.resumed_at:
            self.detail.setText(f"resuming at {human_size(job.resumed_at)} of {human_size(f.size)}")
        if self.state == "planning":
            self._set("running")

    def progressed(self, phase: str, done: int, total: int) -> None:
        self.bar.setRange(0, SCALE)
        self.bar.setValue(int(SCALE * done / max(total, 1)))
        if phase == "verify":
            if self.meter.samples and self.meter.samples[-1][1] > done:
                self.meter.reset()
            self.meter.add(done)
            self.bar.setFormat("checking %p%")
            self.detail.setText(f"checking the file against the Hub's sha256… {human_size(done)} of "
                                f"{human_size(total)}")
        else:
            self.bar.setFormat("%p%")
            self.detail.setText(transfer_text(done, total, self.meter.add(done)))

    def pausing(self) -> None:
        self._set("pausing")
        self.detail.setText("pausing…")

    def paused(self, done: int, size: int) -> None:
        self.bar.setRange(0, SCALE)
        self.bar.setValue(int(SCALE * done / max(size, 1)))
        self.meter.reset()
        self.detail.setText(f"paused with {human_size(done)} of {human_size(size)} kept: Resume goes on "
                            "from there, even after LlamaDesk is closed")
        self._set("paused")

    def finished(self, path: str) -> None:
        self.bar.setFormat("%p%")
        self.bar.setRange(0, SCALE)
        self.bar.setValue(SCALE)
        self.detail.setText(f"done, sha256 checked: {path}")
        self._set("done")

    def ended(self, line: str) -> None:
        """Cancelled or failed: the line says which and what is left."""
        self.bar.setFormat("%p%")
        self.bar.setRange(0, SCALE)
        self.bar.setValue(0)
        self.detail.setText(line)
        self._set("failed")
