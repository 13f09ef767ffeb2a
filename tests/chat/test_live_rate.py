"""The gauges' live decode rate when tokens come in bursts, as a speculative check delivers them."""

from __future__ import annotations

import pytest

from app.chat.live_gauges import LiveGauges
from app.engine.events import TextDelta


def _bursts(every_s: float, size: int, until_s: float) -> LiveGauges:
    g = LiveGauges()
    g.start(0.0, max_tokens=10_000, n_ctx=4096)
    n, t = 0, 0.05
    while t < until_s:
        for i in range(size):  # a check's kept tokens arrive microseconds apart
            n += 1
            g.feed(TextDelta("x", n, t + i * 1e-6), t + i * 1e-6)
        t += every_s
    return g


@pytest.mark.parametrize(("every_s", "size"), [(0.1, 5), (1.3, 4), (0.02, 1)])
def test_the_rate_is_tokens_over_time_not_a_bursts_own_microseconds(every_s, size):
    g = _bursts(every_s, size, until_s=6.0)
    assert g.rolling_rate() == pytest.approx(size / every_s, rel=0.25)


def test_within_one_burst_the_engines_rate_is_shown():
    g = _bursts(1.0, 6, until_s=0.1)  # one burst so far
    g.progress_rate = 42.0
    assert g.rolling_rate() == 42.0
