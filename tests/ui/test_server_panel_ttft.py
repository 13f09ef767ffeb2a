"""The Serve panel's live time to first token, beside the aggregate rate: the interactive
requests' p50 and p99 over the last minute, as HostStats keeps them, and none once a minute
has passed without one."""

from __future__ import annotations

import time
from collections import deque
from types import SimpleNamespace

from PySide6.QtCore import QObject, Signal

from app.serve.engine_host import TTFT_WINDOW_S, HostStats
from app.ui.server.panel import ServerPanel, server_ttft


class _Runner(QObject):
    """What the panel reads of a ServerRunner: serving, its URL and model, and the host's stats."""

    state_changed = Signal(bool, str)

    def __init__(self, stats: HostStats):
        super().__init__()
        self.serving, self.url, self.loaded = True, "http://127.0.0.1:8765/v1", "gemma (loaded in 1 s)"
        self.host = SimpleNamespace(stats=stats)


def test_the_panel_shows_the_last_minutes_ttft_quantiles_beside_the_rate(qtbot):
    stats = HostStats(n_slots=4)
    panel = ServerPanel(_Runner(stats))
    qtbot.addWidget(panel)
    panel.show()
    panel.refresh()
    assert panel.ttft.text() == "no interactive request in the last minute"
    window: deque = deque()
    now = time.time()
    for i in range(100):  # 10 .. 1000 ms, the last 61 of them within the minute
        stats.took(window, now - 99 + i, (i + 1) / 100)
    panel.refresh()
    assert panel.ttft.text() == "p50 700 ms · p99 1000 ms (61 requests)"
    # Beside the aggregate rate: the row under Throughput.
    form = panel.layout().itemAt(1).layout()
    row = lambda w: form.getWidgetPosition(w)[0]
    assert row(panel.ttft) == row(panel.rate) + 1
    assert form.labelForField(panel.ttft).text() == "First token"
    stats.took(window, now + 1, 0.25)
    panel.refresh()
    assert panel.ttft.text().endswith("(61 requests)")  # the oldest left the window
    panel.runner.host = None  # stopped
    panel.refresh()
    assert panel.ttft.text() == "–"


def test_a_minute_without_an_interactive_request_is_said_so():
    stats = HostStats()
    stats.took(deque(), 1000.0, 0.2)
    assert server_ttft(stats, 1000.0 + TTFT_WINDOW_S) == "p50 200 ms · p99 200 ms (1 request)"
    assert server_ttft(stats, 1000.0 + TTFT_WINDOW_S + 1) == "no interactive request in the last minute"
