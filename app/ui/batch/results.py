"""The Batch panel's results table and the dialog that opens one result.

Rows are appended in groups by the panel's refresh timer, never one repaint
per finished request: a 32-slot batch can finish several requests per step.
Each row shows its input line and prompt, and the table keeps input order
(the "#" column, numeric) whatever order requests finish in; a click on a
header sorts by that column instead. The custom_id, often an automatic hash,
is the last column.
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

from app.slots.types import SlotResult, SlotStats
from app.ui.batch.counts import BatchCounts, BatchPlan
from app.ui.widgets.rates import ceiling_line

COLUMNS = ("#", "prompt", "status", "tokens", "TTFT (s)", "tok/s", "reply", "custom_id")
PREVIEW_CHARS = 80
NUMERIC = (0, 3, 4, 5)
RESULT_ROLE = Qt.ItemDataRole.UserRole


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


def progress_line(p, counts: BatchCounts) -> str:
    """Throughput now and on average (the recent rate shows a pause or a chat turn at once); the
    queue and the failures are the table's own counts, the ETA their pace so far."""
    rate = f"{p.tok_s:.0f} tok/s" if p.tok_s else "– tok/s"
    avg = f" (avg {p.avg_tok_s:.0f})" if p.avg_tok_s else ""
    chat = f" · chat {p.online_busy}" if p.online_busy else ""
    left = counts.total - counts.done
    eta = p.elapsed_s / counts.done * left if counts.done else None
    return (f"{rate}{avg} · ETA {fmt_eta(eta)} · {counts.queued} queued · {counts.failed} failed · "
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


def unread_line(custom_id: str, line: int, error: str) -> SlotResult:
    """A line that could not be read: written to the output as an error, shown as one."""
    return SlotResult(custom_id or f"line {line}", "", SlotStats(stop_reason="error", error=error), line)


class ResultsTable(QTableWidget):
    result_opened = Signal(object)  # SlotResult

    def __init__(self, parent=None):
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(COLUMNS)
        self.results: list[SlotResult] = []
        self.prompts: dict[str, str] = {}  # custom_id -> the prompt, from the run's plan
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        self.horizontalHeaderItem(0).setToolTip("the line of the input file")
        self.horizontalHeaderItem(4).setToolTip("time to first token, from when the request was queued")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setAlternatingRowColors(True)
        head = self.horizontalHeader()
        for i in range(len(COLUMNS)):
            head.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        for i in (1, 6):  # prompt and reply share what is left
            head.setSectionResizeMode(i, QHeaderView.ResizeMode.Stretch)
        self.setSortingEnabled(True)
        self.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.cellDoubleClicked.connect(lambda row, _c: self.result_opened.emit(self.result_at(row)))

    def result_at(self, row: int) -> SlotResult:
        return self.results[self.item(row, 0).data(RESULT_ROLE)]

    def in_order(self) -> list[SlotResult]:
        """The rows' results from top to bottom, as the table shows them."""
        return [self.result_at(r) for r in range(self.rowCount())]

    def clear_results(self) -> None:
        self.results = []
        self.prompts = {}
        self.setRowCount(0)

    def plan(self, plan: BatchPlan) -> None:
        """The run's lines: their prompts for the rows to come, and the unreadable ones now."""
        self.prompts = {it.custom_id: it.prompt for it in plan.items}
        self.add_results([unread_line(it.custom_id, it.line, it.error) for it in plan.items if it.error])

    def add_results(self, batch: list[SlotResult]) -> None:
        if not batch:
            return
        self.setUpdatesEnabled(False)
        self.setSortingEnabled(False)  # rows filled whole, then placed by the sort
        try:
            row = self.rowCount()
            self.setRowCount(row + len(batch))
            for res in batch:
                self.results.append(res)
                st = res.stats
                preview = (st.error or res.text).replace("\n", " ⏎ ")[:PREVIEW_CHARS]
                prompt = self.prompts.get(res.custom_id, "")
                cells = (res.line, prompt.replace("\n", " ⏎ ")[:PREVIEW_CHARS], status_of(res),
                         st.completion_tokens, st.ttft_from_queue_s, st.decode_tok_s, preview, res.custom_id)
                for col, value in enumerate(cells):
                    item = _cell(col, value)
                    if col == 0:
                        item.setData(RESULT_ROLE, len(self.results) - 1)
                    if col == 1:
                        item.setToolTip(prompt[:2000])
                    self.setItem(row, col, item)
                row += 1
        finally:
            self.setSortingEnabled(True)
            self.setUpdatesEnabled(True)


class _Number(QTableWidgetItem):
    """Shown as the table always showed it ("4.0"), sorted by its value (a text "10" sorts before "9")."""

    def __init__(self, text: str, value: float | None):
        super().__init__(text)
        self.value = value

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine, theirs = self.value, getattr(other, "value", None)
        if mine is None or theirs is None:
            return mine is None and theirs is not None  # "–" first
        return mine < theirs


def _cell(col: int, value) -> QTableWidgetItem:
    if col not in NUMERIC:
        return QTableWidgetItem("–" if value is None else str(value))
    if value is None:
        text = "not reported" if col == 3 else "–"
    else:
        text = f"{value:.2f}" if col == 4 else (f"{value:.1f}" if col == 5 else str(value))
    item = _Number(text, value)
    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


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
