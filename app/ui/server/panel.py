"""The Server panel: the switch, the URL to give other programs, and the server's load live.

It reads the ServeEngine's counters on a timer (they are plain numbers the
engine thread updates), so nothing here waits on the server. The throughput
it draws is its own count: the tokens the server generated between two of
its reads (HostStats.generated, which starts again from 0 with each run of
the engine) over the last RATE_S seconds, so the line is live while clients
stream and falls to 0 when they stop, where the engine's last reported rate
stayed frozen (or kept a finished run's figure) between runs.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.serve.engine_host import TTFT_WINDOW_S
from app.ui.server.runner import DEFAULT_PORT, ServerRunner
from app.ui.widgets.charts import LineChart
from app.ui.widgets.message_bar import MessageBar
from app.ui.widgets.rates import ceiling_line

HISTORY_S = 60.0
RATE_S = 2.0  # the throughput is over this many seconds of the panel's reads


def server_rate(s) -> str:
    """Aggregate tok/s against the batched ceiling of the sequences decoding now."""
    return f"{s.tok_s:.1f} tok/s" + ceiling_line(s) if s.tok_s else "idle"


def server_ttft(s, now: float) -> str:
    """Interactive requests' time to first token over the last minute: 'p50 180 ms · p99 420 ms
    (12 requests)', or that none came; `now` on the clock of HostStats.ttft_at (time.time())."""
    if s.ttft_p50_s is None or s.ttft_at is None or now - s.ttft_at > TTFT_WINDOW_S:
        return "no interactive request in the last minute"
    n = f"{s.ttft_n} request{'s' if s.ttft_n != 1 else ''}"
    return f"p50 {s.ttft_p50_s * 1000:.0f} ms · p99 {s.ttft_p99_s * 1000:.0f} ms ({n})"


class ServerPanel(QWidget):
    toggled = Signal(bool)  # the user asked to start (True) or stop (False) serving

    def __init__(self, runner: ServerRunner, port: int = DEFAULT_PORT, parent=None):
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Server — LlamaDesk")
        self.runner = runner
        self.switch = QCheckBox()
        self.port = QSpinBox()
        self.port.setRange(1024, 65535)
        self.port.setValue(port)
        self.port.valueChanged.connect(self._label_switch)
        self.url = QLineEdit()
        self.url.setReadOnly(True)
        self.copy = QPushButton("Copy")
        self.copy.clicked.connect(lambda: QApplication.clipboard().setText(self.url.text()))
        self.bar = MessageBar()
        self.model = QLabel("–")
        self.model.setWordWrap(True)
        self.slots = QLabel("–")
        self.queued = QLabel("–")
        self.rate = QLabel("–")
        self.ttft = QLabel("–")
        self.plot = LineChart("throughput (tok/s)", "seconds (0: now)", trailing_s=HISTORY_S)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["time", "request", "kind", "TTFT", "tok/s"])
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self._series: deque = deque()
        self._t0 = time.monotonic()
        self._last_shown = None
        self._generated: int | None = None  # the server's count at the last read
        self._counted: deque[tuple[float, int]] = deque()  # (read at, tokens since the read before)
        self._started_at: float | None = None
        self.switch.toggled.connect(self.toggled)
        runner.state_changed.connect(self._on_state)

        row = QHBoxLayout()
        row.addWidget(self.url, 1)
        row.addWidget(self.copy)
        form = QFormLayout()
        form.addRow(self.switch)
        form.addRow("Port", self.port)
        form.addRow("OpenAI base URL", row)
        form.addRow("Model", self.model)
        form.addRow("Answering now", self.slots)
        form.addRow("Waiting", self.queued)
        form.addRow("Throughput", self.rate)
        form.addRow("First token", self.ttft)
        self.slots.setToolTip("Requests being answered at once: the server decodes up to this many "
                              "together, one place kept free for an interactive request (the chat's, "
                              "or a client streaming).")
        self.rate.setToolTip("Tokens the server generated per second, over the last 2 seconds, for "
                             "all requests together.")
        self.ttft.setToolTip("Time to first token of the interactive requests (the chat's and API "
                             "clients') that ended in the last minute, from arrival: the median "
                             "(p50) and the slowest but 1% (p99).")
        col = QVBoxLayout(self)
        col.addWidget(self.bar)
        col.addLayout(form)
        col.addWidget(self.plot, 1)
        col.addWidget(QLabel("recent requests"))
        col.addWidget(self.table, 1)
        self._timer = QTimer(self)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self.refresh)
        self._label_switch()
        self._on_state(runner.serving, runner.url or "")
        self.resize(560, 620)

    def _throughput(self, now: float, generated: int) -> float | None:
        """Tokens per second over the last RATE_S s of reads; None before two reads."""
        last, self._generated = self._generated, generated
        if last is None:
            return None
        self._counted.append((now, generated - last if generated >= last else generated))
        while self._counted and now - self._counted[0][0] > RATE_S:
            self._counted.popleft()
        span = min(RATE_S, now - (self._started_at if self._started_at is not None else now))
        return sum(n for _, n in self._counted) / span if span > 0 else None

    def _label_switch(self) -> None:
        self.switch.setText(f"Serve on http://127.0.0.1:{self.port.value()}")

    def show_problem(self, line: str) -> None:
        self.bar.show_message(line, "error")
        self.switch.blockSignals(True)
        self.switch.setChecked(False)
        self.switch.blockSignals(False)

    def _on_state(self, serving: bool, line: str) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(serving)
        self.switch.blockSignals(False)
        self.port.setEnabled(not serving)
        self.url.setText(line if serving else "")
        self.model.setText(self.runner.loaded if serving else "–")
        self.copy.setEnabled(serving)
        if serving:
            self.bar.hide()
            self._generated, self._started_at = None, time.monotonic() - self._t0
            self._counted.clear()
            self._timer.start()
        else:
            self._timer.stop()
            if line and line != "stopped":
                self.bar.show_message(f"Not serving: {line}", "info")
        self.refresh()

    def refresh(self) -> None:
        host = self.runner.host
        if host is None:
            self.slots.setText("–")
            self.queued.setText("–")
            self.rate.setText("not serving")
            self.ttft.setText("–")
            return
        s = host.stats
        batch = s.busy - s.online_busy
        self.slots.setText(f"{s.busy} of {s.n_slots + 1} requests ({s.online_busy} interactive, "
                           f"{batch} batch)")
        self.queued.setText(f"{s.queued} request{'s' if s.queued != 1 else ''}")
        now = time.monotonic() - self._t0
        tok_s = self._throughput(now, s.generated)
        self.rate.setText(server_rate(replace(s, tok_s=tok_s)))
        self.ttft.setText(server_ttft(s, time.time()))
        self._series.append((now, tok_s or 0.0))
        while self._series and now - self._series[0][0] > HISTORY_S:
            self._series.popleft()
        self.plot.set_data([(t - now, r) for t, r in self._series], s.ceiling_tok_s)
        recent = list(s.recent)
        if recent and recent[-1] != self._last_shown:
            self._last_shown = recent[-1]
            self.table.setRowCount(len(recent))
            for row, (at, rid, ttft, rate, online) in enumerate(reversed(recent)):
                kind = "interactive" if online else "batch"
                cells = (time.strftime("%H:%M:%S", time.localtime(at)), rid, kind,
                         f"{ttft * 1000:.0f} ms" if ttft is not None else "–", f"{rate:.1f}" if rate else "–")
                for c, text in enumerate(cells):
                    self.table.setItem(row, c, QTableWidgetItem(text))
