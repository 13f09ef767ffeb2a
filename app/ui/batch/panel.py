"""The Batch window: a file (or pasted prompts) decoded together while the chat stays usable.

A separate top-level window rather than a tab, so the user can watch a long
batch beside the conversation. Engine events are only recorded when they
arrive; a 100 ms timer paints the latest progress and appends the finished
rows in one go, so a burst of results costs one repaint. Every count it
shows (the bar, the occupancy, the queue, the failures) comes from one
BatchCounts, fed the run's plan and its request events (app.ui.batch.counts).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.engine.sampling import GenerationSettings
from app.paths import data_dir
from app.slots.engine import DEFAULT_SLOTS
from app.slots.types import BatchProgress
from app.ui.batch.counts import BatchCounts, BatchPlan
from app.ui.batch.results import ResultDialog, ResultsTable, progress_line, summary_line
from app.ui.batch.worker import BatchRunner, BatchSpec, BatchTarget
from app.ui.widgets.message_bar import MessageBar

REFRESH_MS = 100


class BatchPanel(QWidget):
    batch_started = Signal()
    batch_finished = Signal(object)  # JobSummary, or None when it failed
    progress_shown = Signal(object)  # the BatchProgress just painted (tests, gauges)

    def __init__(self, runner: BatchRunner, model_source: Callable[[], BatchTarget | None],
                 settings: Callable[[], GenerationSettings], parent=None):
        """`runner` is the window's (it also routes chat turns); `model_source` gives what to
        run on (the loaded weights, or the connected server), or None while nothing is loaded."""
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Batch — LlamaDesk")
        self.model_source, self.settings_source = model_source, settings
        self.runner = runner
        self.progress: BatchProgress | None = None
        self.counts: BatchCounts | None = None  # from the run's plan on
        self._pending: list = []
        self._build()
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        self._set_running(False)
        self.resize(900, 640)

    def _build(self) -> None:
        self.bar = MessageBar()
        self.input_edit = QLineEdit()
        self.input_edit.setPlaceholderText(
            "requests.jsonl (OpenAI Batch format) or a text file, one prompt per line")
        self.paste = QPlainTextEdit()
        self.paste.setPlaceholderText("…or paste prompts here, one per line (used when no input file is set)")
        self.paste.setMaximumHeight(110)
        self.output_edit = QLineEdit()
        self.output_edit.setPlaceholderText("results .jsonl (appended; re-running skips finished custom_ids)")
        in_btn, out_btn = QPushButton("Choose…"), QPushButton("Choose…")
        in_btn.clicked.connect(lambda: self._choose(self.input_edit, QFileDialog.getOpenFileName,
                                                    "Requests (*.jsonl *.json *.txt);;All (*)"))
        out_btn.clicked.connect(lambda: self._choose(self.output_edit, QFileDialog.getSaveFileName,
                                                     "JSONL (*.jsonl)"))
        self.slots = QSpinBox()
        self.slots.setRange(1, 255)  # one more sequence is kept for chat turns (llama.cpp: 256)
        self.slots.setValue(DEFAULT_SLOTS)
        self.slots.setToolTip("Sequences decoded together (one more is kept for chat messages)")
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(self.settings_source().max_tokens)
        self.route_chat = QCheckBox("Answer chat messages inside the batch")
        self.route_chat.setChecked(self.runner.route_chat)
        self.route_chat.toggled.connect(lambda on: setattr(self.runner, "route_chat", on))
        self.route_chat.setToolTip("On: a message you send in the chat while the batch runs is answered "
                                   "by the batch, in a place it keeps free, so chatting never slows the "
                                   "batch. Off: the chat answers with its own copy of the context, which "
                                   "measured faster replies here (2 cores).")
        self.start_button = QPushButton("Start")
        self.pause_button = QPushButton("Pause")
        self.cancel_button = QPushButton("Cancel")
        self.start_button.clicked.connect(self.start)
        self.pause_button.clicked.connect(self.toggle_pause)
        self.cancel_button.clicked.connect(self.cancel)
        self.done_bar = QProgressBar()
        self.done_bar.setFormat("%v of %m requests done")
        self.slot_bar = QProgressBar()
        self.slot_bar.setFormat("%v of %m decoding together")
        self.slot_bar.setToolTip("Requests being decoded at once, of the parallel slots")
        self.rate_label = QLabel("–")
        self.table = ResultsTable()
        self.table.result_opened.connect(self.open_result)
        self.save_button = QPushButton("Save results as…")
        self.copy_button = QPushButton("Copy results")
        self.save_button.clicked.connect(self._save_as)
        self.copy_button.clicked.connect(self.copy_results)

        grid = QGridLayout()
        for row, (label, w, btn) in enumerate((("Input", self.input_edit, in_btn), ("", self.paste, None),
                                                ("Output", self.output_edit, out_btn))):
            grid.addWidget(QLabel(label), row, 0)
            grid.addWidget(w, row, 1, 1, 1 if btn else 2)
            if btn:
                grid.addWidget(btn, row, 2)
        controls = QHBoxLayout()
        for w in (QLabel("Parallel slots"), self.slots, QLabel("Max tokens"), self.max_tokens,
                  self.route_chat, None,
                  self.start_button, self.pause_button, self.cancel_button):
            controls.addWidget(w) if w is not None else controls.addStretch(1)
        meters = QGridLayout()
        for row, (label, w) in enumerate((("Progress", self.done_bar), ("Occupancy", self.slot_bar),
                                          ("", self.rate_label))):
            meters.addWidget(QLabel(label), row, 0)
            meters.addWidget(w, row, 1)
        export = QHBoxLayout()
        export.addStretch(1)
        export.addWidget(self.copy_button)
        export.addWidget(self.save_button)
        col = QVBoxLayout(self)
        col.addWidget(self.bar)
        col.addLayout(grid)
        col.addLayout(controls)
        col.addLayout(meters)
        col.addWidget(self.table, 1)
        col.addLayout(export)

    # -- state ----------------------------------------------------------------
    def _set_running(self, on: bool) -> None:
        self.start_button.setEnabled(not on)
        self.pause_button.setEnabled(on)
        self.cancel_button.setEnabled(on)
        self.pause_button.setText("Pause")
        for w in (self.input_edit, self.paste, self.output_edit, self.slots, self.max_tokens):
            w.setEnabled(not on)
        has_output = bool(self.output_edit.text()) and Path(self.output_edit.text()).exists()
        self.save_button.setEnabled(has_output)
        self.copy_button.setEnabled(has_output)

    # -- actions --------------------------------------------------------------
    def start(self) -> bool:
        if self.runner.running:
            return False
        got = self.model_source()
        if got is None:
            self.bar.show_message("No model is loaded yet: wait for the chat's model to load.", "warning")
            return False
        try:
            src = self._input_path()
        except (OSError, ValueError) as e:
            self.bar.show_message(str(e), "error")
            return False
        if not self.output_edit.text().strip():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self.output_edit.setText(str(data_dir() / "batches" / f"batch-{stamp}.jsonl"))
        out = Path(self.output_edit.text().strip())
        defaults = self.settings_source()
        defaults.max_tokens = self.max_tokens.value()
        self.bar.hide()
        self.table.clear_results()
        self.progress, self.counts, self._pending = None, None, []
        self.done_bar.setRange(0, 0)  # busy until the run says how many requests it has
        self.done_bar.setFormat("reading the input…")
        self.slot_bar.setRange(0, self.slots.value())
        self.slot_bar.setValue(0)
        self.rate_label.setText("starting…")
        self.runner.start(BatchSpec(str(src), str(out), self.slots.value(), defaults, got),
                          self._connect)
        self._set_running(True)
        self._timer.start()
        self.batch_started.emit()
        return True

    def _connect(self, w) -> None:
        w.batch_event.connect(self._on_event)
        w.started.connect(self._on_started)
        w.finished.connect(self._on_finished)
        w.failed.connect(self._on_failed)

    def _input_path(self) -> Path:
        typed = self.input_edit.text().strip()
        if typed:
            return Path(typed)
        text = self.paste.toPlainText()
        if not text.strip():
            raise ValueError("Choose an input file or paste prompts (one per line).")
        d = data_dir() / "batches"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"pasted-{time.strftime('%Y%m%d-%H%M%S')}.txt"
        p.write_text(text, encoding="utf-8")
        return p

    def toggle_pause(self) -> None:
        paused = self.pause_button.text() == "Resume"
        self.runner.pause(not paused)
        self.pause_button.setText("Pause" if paused else "Resume")

    def cancel(self) -> bool:
        """Stop now and join the thread; finished results are already in the output file."""
        ok = self.runner.join(2.0)
        self._end()
        return ok and self.runner.batch_thread is None

    def shutdown(self) -> bool:
        return self.runner.batch_thread is None or self.cancel()

    def closeEvent(self, ev) -> None:
        self.shutdown()
        super().closeEvent(ev)

    # -- events (GUI thread, queued) -------------------------------------------
    def _stale(self) -> bool:
        return self.sender() is not self.runner.worker

    def _on_started(self, plan: BatchPlan) -> None:
        if self._stale():
            return
        self.counts = BatchCounts.of(plan)
        self.table.plan(plan)
        self.done_bar.setFormat("%v of %m requests done")
        self.done_bar.setRange(0, max(1, self.counts.total))
        self.done_bar.setValue(0)
        if plan.skipped:
            self.bar.show_message(f"Resuming: {plan.skipped} requests are already in the output.", "info")

    def _on_event(self, ev) -> None:
        if self._stale() or self.counts is None:
            return
        if isinstance(ev, BatchProgress):
            self.progress = ev
            return
        res = self.counts.feed(ev)
        if res is not None and res.stats.stop_reason != "cancelled":
            self._pending.append(res)

    def _refresh(self) -> None:
        self.table.add_results(self._pending)
        self._pending = []
        p, c = self.progress, self.counts
        if c is None:
            return
        self.done_bar.setValue(c.done)
        self.slot_bar.setValue(c.running)
        if p is None:
            return
        self.slot_bar.setRange(0, p.n_slots)
        self.rate_label.setText(progress_line(p, c))
        self.progress_shown.emit(p)

    def _on_finished(self, summary) -> None:
        if self._stale():
            return
        self._end()
        self.rate_label.setText(summary_line(summary))
        self.batch_finished.emit(summary)

    def _on_failed(self, message: str) -> None:
        if self._stale():
            return
        self._end()
        self.bar.show_message(f"Batch: {message}", "error")
        self.batch_finished.emit(None)

    def _end(self) -> None:
        self._timer.stop()
        self._refresh()  # the last rows and counts
        self.runner.join()  # the worker is done (or told to stop): this returns at once
        self._set_running(self.runner.running)

    # -- results --------------------------------------------------------------
    def open_result(self, res) -> ResultDialog:
        dlg = ResultDialog(res, self)
        dlg.show()
        return dlg

    def copy_results(self) -> None:
        text = Path(self.output_edit.text()).read_text(encoding="utf-8")
        QApplication.clipboard().setText(text)

    def _save_as(self) -> None:
        dest, _ = QFileDialog.getSaveFileName(self, "Save results as", "results.jsonl", "JSONL (*.jsonl)")
        if dest:
            self.save_results(dest)

    def save_results(self, dest: str) -> None:
        try:
            shutil.copyfile(self.output_edit.text(), dest)
        except OSError as e:
            self.bar.show_message(f"Could not save the results: {e}", "error")

    def _choose(self, edit: QLineEdit, ask, filters: str) -> None:
        path, _ = ask(self, "Batch file", edit.text(), filters)
        if path:
            edit.setText(path)

