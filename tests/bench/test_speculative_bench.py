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


def test_check_cost_times_a_step_and_a_check_with_and_without_every_rows_logits(engine):
    from app.bench.check_cost import PREFIX, check_cost

    words = engine.model.llm.tokenize(" ".join(EDITING).encode(), add_bos=False)
    got = check_cost(engine.model, (words * 4)[:PREFIX + 16], rows=5, rounds=3)
    assert got["rows"] == 5
    assert got["step_ms"] > 0 and got["check_ms"] > 0 and got["check_last_logits_ms"] > 0
    assert got["check_in_steps"] == round(got["check_ms"] / got["step_ms"], 2)
    assert got["output_rows_share"] < 1
