"""The Batch panel's results table and the dialog that opens one result.

Rows are appended in groups by the panel's refresh timer, never one repaint
per finished request: a 32-slot batch can finish several requests per step.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.batch.types import SlotResult
from app.ui.widgets.rates import ceiling_line

COLUMNS = ("custom_id", "status", "tokens", "TTFT", "tok/s", "reply")
PREVIEW_CHARS = 80


def status_of(res: SlotResult) -> str:
    st = res.stats
    if st.error:
        return "error"
    return "ok" if st.stop_reason in ("stop", "length") and res.ok else st.stop_reason


def fmt_eta(s: float | None) -> str:
    if s is None:
        return "--:--"
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def progress_line(p) -> str:
    """Throughput now and on average: the recent rate shows a pause or a chat turn at once."""
    rate = f"{p.tok_s:.0f} tok/s" if p.tok_s else "– tok/s"
    avg = f" (avg {p.avg_tok_s:.0f})" if p.avg_tok_s else ""
    chat = f" · chat {p.online_busy}" if p.online_busy else ""
    return (f"{rate}{avg} · ETA {fmt_eta(p.eta_s)} · {p.queued} queued · {p.failed} failed · "
            f"{p.generated} tokens{chat}" + (" · paused" if p.paused else "") + ceiling_line(p))


def summary_line(sm) -> str:
    return (f"Done: {sm.ok} ok, {sm.errors} errors" + (f", {sm.cancelled} cancelled" if sm.cancelled else "")
            + (f", {sm.skipped} already done" if sm.skipped else "")
            + (f" · {sm.tok_s:.0f} tok/s" if sm.tok_s else "") + f" · {sm.wall_s:.1f} s")


def _count(n: int | None) -> str:
    """A token count, or "not reported" (a remote server that did not send usage)."""
    return "not reported" if n is None else str(n)


def _num(v: float | None, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


class ResultsTable(QTableWidget):
    result_opened = Signal(object)  # SlotResult

    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(COLUMNS)
        self.results: list[SlotResult] = []
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.horizontalHeaderItem(3).setToolTip("time to first token, from when the request was queued")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setAlternatingRowColors(True)
        head = self.horizontalHeader()
        for i in range(len(COLUMNS) - 1):
            head.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.cellDoubleClicked.connect(lambda row, _c: self.result_opened.emit(self.results[row]))

    def clear_results(self) -> None:
        self.results = []
        self.setRowCount(0)

    def add_results(self, batch: list[SlotResult]) -> None:
        if not batch:
            return
        self.setUpdatesEnabled(False)
        try:
            row = self.rowCount()
            self.setRowCount(row + len(batch))
            for res in batch:
                self.results.append(res)
                st = res.stats
                preview = (st.error or res.text).replace("\n", " ⏎ ")[:PREVIEW_CHARS]
                cells = (res.custom_id, status_of(res), _count(st.completion_tokens),
                         _num(st.ttft_from_queue_s, ".2f") + (" s" if st.ttft_from_queue_s else ""),
                         _num(st.decode_tok_s, ".1f"), preview)
                for col, text in enumerate(cells):
                    item = QTableWidgetItem(text)
                    if col in (2, 3, 4):
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.setItem(row, col, item)
                row += 1
        finally:
            self.setUpdatesEnabled(True)
        self.scrollToBottom()


class ResultDialog(QDialog):
    """The whole reply and its measured record, for reading one result closely."""

    def __init__(self, res: SlotResult, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Result {res.custom_id}")
        st = res.stats
        lines = [f"status: {status_of(res)} ({st.stop_reason})",
                 f"tokens: {_count(st.prompt_tokens)} prompt, {_count(st.completion_tokens)} generated",
                 f"TTFT: {_num(st.ttft_from_queue_s, '.3f')} s from queued, "
                 f"{_num(st.ttft_from_slot_s, '.3f')} s from its slot",
                 f"queue wait: {_num(st.queue_wait_s, '.2f')} s · total {_num(st.total_s, '.2f')} s · "
                 f"{_num(st.decode_tok_s, '.1f')} tok/s · slot {st.slot}"]
        if st.error:
            lines.append(f"error: {st.error}")
        self.stats_label = QLabel("\n".join(lines))
        self.stats_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit(res.text)
        self.text.setReadOnly(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(self.stats_label)
        col.addWidget(self.text, 1)
        col.addWidget(buttons)
        self.resize(640, 480)
