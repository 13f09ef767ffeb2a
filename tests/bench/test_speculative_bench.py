"""`bench --speculative`'s per-prompt figures on the chat's decoder: each prompt's own speedup, so
the median prompt is reported beside the set's summed speedup (which a few prompts with long
copied runs can carry). Two short editing prompts through the real engine; figures not judged."""

from __future__ import annotations

import pytest

from app.bench.speculative import _run_set
from app.bench.speculative_set import EDITING

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_the_chat_decoders_set_reports_each_prompts_speedup_and_their_median(engine):
    got = _run_set(engine, EDITING[:2], 24)
    assert got["prompts"] == 2
    lo, mid, hi = got["min_prompt_speedup"], got["median_prompt_speedup"], got["max_prompt_speedup"]
    assert 0 < lo <= mid <= hi, got
    assert 0 <= got["prompts_faster"] <= 2
    assert got["speedup"] > 0 and got["checks"] >= 0
