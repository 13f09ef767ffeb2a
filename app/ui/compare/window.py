"""The Compare window: add targets from the model picker, type or load prompts, run with progress
and Cancel, read the table, the texts side by side and the chart; reopen earlier comparisons.

The run is app.compare's, on a QThread of its own (each local target is
loaded there, alone, and freed before the next); the window only shows its
record, report.to_json's, the same one `compare --json` prints, so a
reopened comparison looks exactly as it did.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.compare import saved
from app.compare.report import COLUMNS, EXPORTERS, to_json
from app.compare.targets import MAX_TARGETS, Target, apply_set, check_targets
from app.config import SavedEndpoint
from app.engine.control import CancelToken
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError
from app.remote.endpoint import Endpoint
from app.ui.compare.chart import CompareChart
from app.ui.compare.worker import CompareWorker
from app.ui.model_bar import ModelBar
from app.ui.threads import WorkerThread
from app.ui.widgets.message_bar import MessageBar

Choice = tuple[str, Callable[[], Target]]  # a picker entry's label, and the Target it makes


def compare_choices(model_bar: ModelBar, endpoint_for: Callable[[SavedEndpoint], Endpoint]) -> list[Choice]:
    """(label, Target factory) for everything the model picker lists: the default model, the
    files found, the saved servers. `endpoint_for(saved)` is the saved server's Endpoint with
    the key this session knows for it (typed in Connect, or from its environment variable); a
    keyring's key is added when the comparison opens it, off the GUI thread."""
    out: list[Choice] = []
    for label, item in model_bar.entries():
        if item is None:
            out.append((label, lambda: Target("model", "")))  # "": the bundled default, assembled if need be
        elif isinstance(item, SavedEndpoint):
            out.append((label, partial(_endpoint_target, endpoint_for, item)))
        else:
            out.append((label, partial(Target, "model", item)))
    return out


def _endpoint_target(endpoint_for: Callable[[SavedEndpoint], Endpoint], saved: SavedEndpoint) -> Target:
    return Target.for_endpoint(endpoint_for(saved), saved.model, saved.prompt_format)


class CompareWindow(QWidget):
    finished = Signal(object)  # the record shown (report.to_json's)
    _start = Signal(object)

    def __init__(self, choices: Callable[[], list[Choice]], settings: Callable[[], GenerationSettings],
                 parent: QWidget | None = None):
        """`choices()` lists (label, Target factory) from the model picker; `settings()` the
        window's sampling settings, which every target starts from."""
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Compare — LlamaDesk")
        self.choices, self.settings_source = choices, settings
        self.targets: list[Target] = []
        self.record: dict | None = None
        self._saved_shown = -1  # the earlier comparison shown, as the history list numbers it
        self.comparison = None
        self.cancel_token: CancelToken | None = None
        self.bar = MessageBar()
        self.picker = QComboBox()
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(20)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add_selected)
        self.target_list = QListWidget()
        self.set_edit = QLineEdit()
        self.set_edit.setPlaceholderText("settings of the selected target, e.g. threads=1, kv=q8_0")
        self.set_edit.returnPressed.connect(self.apply_settings)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.prompts = QPlainTextEdit()
        self.prompts.setPlaceholderText("Prompts, one per line")
        self.load_button = QPushButton("Load prompts…")
        self.load_button.clicked.connect(self._load_prompts)
        self.repeat = QSpinBox()
        self.repeat.setRange(1, 100)
        self.repeat.setValue(3)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 8192)
        self.max_tokens.setValue(128)
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.history = QComboBox()
        # Long labels must not widen the window (1,000 to 1,380 px): they are cut, whole in the list.
        self.history.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.history.setMinimumContentsLength(14)
        self.history.setPlaceholderText("earlier comparisons")
        self.history.activated.connect(self._reopen)
        self.export_button = QPushButton("Export…")
        self.export_button.clicked.connect(self._export_dialog)
        self.table = QTableWidget(0, 3 + len(COLUMNS))
        self.table.setHorizontalHeaderLabels(["target", "runs", *[c[1] for c in COLUMNS], "predicted s"])
        self.table.verticalHeader().hide()
        self.texts = QSplitter(Qt.Orientation.Horizontal)
        self.chart = CompareChart()
        self._build()
        self.worker = CompareWorker()
        self.compare_thread = WorkerThread("llamadesk-compare", self.worker,
                                           requests=((self._start, self.worker.run),), stop=self.cancel)
        self.worker.progress.connect(self._on_progress)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.compare_thread.start()
        self.refresh_choices()
        self.resize(1000, 760)

    def _build(self) -> None:
        row = QHBoxLayout()
        row.addWidget(QLabel("Target"))
        row.addWidget(self.picker, 1)
        row.addWidget(self.add_button)
        edit = QHBoxLayout()
        edit.addWidget(self.set_edit, 1)
        edit.addWidget(self.remove_button)
        runrow = QHBoxLayout()
        for w in (QLabel("Runs per prompt"), self.repeat, QLabel("Max tokens"), self.max_tokens,
                  self.run_button, self.cancel_button):
            runrow.addWidget(w)
        runrow.addWidget(self.progress, 1)
        runrow.addWidget(QLabel("Earlier"))
        runrow.addWidget(self.history, 1)
        runrow.addWidget(self.export_button)
        top = QHBoxLayout()
        left = QVBoxLayout()
        left.addLayout(row)
        left.addWidget(self.target_list)
        left.addLayout(edit)
        right = QVBoxLayout()
        right.addWidget(self.prompts)
        right.addWidget(self.load_button)
        top.addLayout(left, 1)
        top.addLayout(right, 1)
        self.target_list.setMaximumHeight(120)  # the results below get the height
        self.prompts.setMaximumHeight(120)
        results = QSplitter(Qt.Orientation.Vertical)
        results.addWidget(self.table)
        results.addWidget(self.texts)
        results.addWidget(self.chart)
        results.setChildrenCollapsible(False)
        for i, stretch in enumerate((2, 3, 0)):  # replies readable; the chart as tall as its bars
            results.setStretchFactor(i, stretch)
        self.texts.setMinimumHeight(120)
        rows = self.table.verticalHeader().defaultSectionSize() * MAX_TARGETS  # never more rows than that
        self.table.setMaximumHeight(rows + self.table.horizontalHeader().sizeHint().height() + 6)
        col = QVBoxLayout(self)
        col.addWidget(self.bar)
        col.addLayout(top)
        col.addLayout(runrow)
        col.addWidget(results, 1)

    # -- targets --------------------------------------------------------------
    def refresh_choices(self) -> None:
        self.picker.clear()
        self._makers = []
        for label, make in self.choices():
            self.picker.addItem(label)
            self._makers.append(make)
        self.history.clear()
        self._saved = saved.listing()
        for _p, label in self._saved:
            self.history.addItem(label)
            self.history.setItemData(self.history.count() - 1, label, Qt.ItemDataRole.ToolTipRole)
        # Nothing shown as chosen until one is: the table is empty until then.
        self.history.setCurrentIndex(self._saved_shown if self.record is not None else -1)

    def add_target(self, t: Target) -> None:
        if len(self.targets) >= MAX_TARGETS:
            self.bar.show_message(f"A comparison holds at most {MAX_TARGETS} targets.", "warning")
            return
        self.targets.append(t)
        self.target_list.addItem(f"#{len(self.targets)} {t.label}")
        self.target_list.setCurrentRow(len(self.targets) - 1)

    def add_selected(self) -> None:
        i = self.picker.currentIndex()
        if 0 <= i < len(self._makers):
            try:
                target = self._makers[i]()
            except LlamaDeskError as e:  # a saved server whose key variable is not set
                self.bar.show_message(str(e), "error")
                return
            self.add_target(target)

    def remove_selected(self) -> None:
        i = self.target_list.currentRow()
        if 0 <= i < len(self.targets):
            del self.targets[i]
            self._relist()

    def apply_settings(self) -> None:
        """`KEY=VALUE, ...` onto the selected target; a bad item is one message, nothing half-set."""
        i = self.target_list.currentRow()
        if not 0 <= i < len(self.targets):
            return
        t = self.targets[i]
        trial = t.without_settings()
        try:
            for item in (s.strip() for s in self.set_edit.text().split(",")):
                if item:
                    apply_set(trial, item)
        except ValueError as e:
            self.bar.show_message(str(e), "error")
            return
        self.targets[i] = trial
        self.bar.hide()
        self._relist()
        self.target_list.setCurrentRow(i)

    def _relist(self) -> None:
        self.target_list.clear()
        for k, t in enumerate(self.targets, 1):
            self.target_list.addItem(f"#{k} {t.label}")

    def _load_prompts(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Prompts, one per line", "",
                                              "Text (*.txt *.jsonl);;All (*)")
        if path:
            try:
                self.prompts.setPlainText(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as e:
                self.bar.show_message(f"{path}: cannot be read ({e})", "error")

    # -- running --------------------------------------------------------------
    def start(self) -> bool:
        prompts = [ln.strip() for ln in self.prompts.toPlainText().splitlines() if ln.strip()]
        try:
            check_targets(self.targets)
            if not prompts:
                raise ValueError("Type a prompt (one per line) or load a file of them.")
        except ValueError as e:
            self.bar.show_message(str(e), "error")
            return False
        base: GenerationSettings = self.settings_source()
        base.max_tokens = self.max_tokens.value()
        self.cancel_token = CancelToken()
        self.progress.setRange(0, len(self.targets) * len(prompts) * self.repeat.value())
        self.progress.setValue(0)
        self.bar.hide()
        self._running(True)
        self._start.emit((list(self.targets), prompts, base, self.repeat.value(), self.cancel_token))
        return True

    def cancel(self) -> None:
        if self.cancel_token is not None:
            self.cancel_token.cancel()  # the running reply stops at its next token

    def _running(self, on: bool) -> None:
        self.run_button.setEnabled(not on)
        self.cancel_button.setEnabled(on)
        self.add_button.setEnabled(not on)
        self.remove_button.setEnabled(not on)

    def _on_progress(self, label: str, done: int, total: int) -> None:
        self.progress.setValue(done)
        self.progress.setFormat(f"{done}/{total}")
        self.progress.setToolTip(f"running {label}")

    def _on_failed(self, message: str) -> None:
        self._running(False)
        self.bar.show_message(f"The comparison stopped: {message}", "error")

    def _on_finished(self, cmp) -> None:
        self._running(False)
        self.comparison = cmp
        record = to_json(cmp)
        self._saved_shown = 0  # saved, it heads the list (newest first)
        try:
            saved.save(record)
        except OSError as e:
            self._saved_shown = -1
            self.bar.show_message(f"Could not keep the comparison in the history: {e}", "warning")
        if cmp.cancelled:
            self.bar.show_message("Cancelled: the table holds what finished.", "info")
        self.show_record(record)
        self.refresh_choices()
        self.finished.emit(record)

    # -- showing --------------------------------------------------------------
    def show_record(self, record: dict) -> None:
        self.record = record
        rows = record["rows"]
        best = {m: b["target"] for m, b in record["best"].items() if b.get("clear")}
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            st = row["stats"]
            cells = [f"#{r + 1} {row['target']}", str(row["runs"])]
            for metric, _name, scale, digits in COLUMNS:
                v = st.get(metric)
                cells.append("–" if v is None else f"{v * scale:,.{digits}f}")
            pred = st.get("predicted_total_s")
            cells.append("–" if pred is None else f"{pred:.2f}")
            if row["error"] and not row["runs"]:
                cells[2] = f"failed: {row['error']}"
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if 2 <= c < 2 + len(COLUMNS) and best.get(COLUMNS[c - 2][0]) == row["target"] \
                        and COLUMNS[c - 2][0] != "decode_tokens":
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                    item.setToolTip("best, outside the others' spread")
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        while self.texts.count():
            self.texts.widget(0).setParent(None)
        for k, row in enumerate(rows, 1):
            view = QTextBrowser()
            view.setPlainText(f"#{k} {row['target']}\n\n" + (row["text"] or row["error"] or ""))
            self.texts.addWidget(view)
        self.chart.set_rows([(row["target"], (row["stats"].get("ttft_s") or 0) * 1000 or None,
                              row["stats"].get("decode_tok_s")) for row in rows])

    def _reopen(self, index: int) -> None:
        if 0 <= index < len(self._saved):
            self._saved_shown = index
            try:
                self.show_record(saved.load(self._saved[index][0]))
            except ValueError as e:
                self.bar.show_message(str(e), "error")

    def export(self, path: str) -> None:
        """Markdown, CSV or JSON, by the extension; only a comparison run here can be exported
        as Markdown or CSV (they need its runs), a reopened one as JSON."""
        p = Path(path)
        ext = p.suffix.lower()
        if ext not in EXPORTERS:
            raise ValueError(f"{p}: the export must end in .md, .csv or .json")
        if self.comparison is not None:
            p.write_text(EXPORTERS[ext](self.comparison), encoding="utf-8")
        elif self.record is not None and ext == ".json":
            import json

            p.write_text(json.dumps(self.record, indent=2) + "\n", encoding="utf-8")
        else:
            raise ValueError("run a comparison first (a reopened one exports as .json)")

    def _export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the comparison", "comparison.md",
                                              "Markdown (*.md);;CSV (*.csv);;JSON (*.json)")
        if path:
            try:
                self.export(path)
            except (ValueError, OSError) as e:
                self.bar.show_message(str(e), "error")

    def shutdown(self) -> None:
        """Cancel the run and end the thread; a target being loaded gets 30 s to finish."""
        self.compare_thread.shutdown(30.0, patience_s=0)

    def closeEvent(self, ev) -> None:
        self.cancel()
        super().closeEvent(ev)
