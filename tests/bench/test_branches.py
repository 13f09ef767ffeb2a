"""bench --branches on a small conversation (~400 tokens, one repeat): every case runs and says what
it reused. Which cases reuse more is checked; how much faster they are is the benchmark's business,
not this test's (no timing is asserted beyond "measured")."""

from __future__ import annotations

import os

from app.bench.branches import CASES, run_branches_bench, table
from app.engine.loader import LoadOptions


def test_the_branches_bench_reuses_the_shared_prefix_of_each_branch(model_path):
    cache_home = os.environ["XDG_CACHE_HOME"]
    r = run_branches_bench(model_path, LoadOptions(n_ctx=1024), target_tokens=400, turns=4, repeats=1)
    assert os.environ["XDG_CACHE_HOME"] == cache_home  # the restart's private folder is given back
    cases = r["cases"]
    assert list(cases) == list(CASES) and r["repeats"] == 1 and r["n_ctx"] == 4096
    assert 300 <= r["main_prompt_tokens"] <= 520
    for name, c in cases.items():
        assert c["ttft_s"] > 0 and c["cold_ttft_s"] > 0 and c["cold_over_case"] > 0, name
        assert c["cached_tokens"] + c["prefill_tokens"] == c["prompt_tokens"], name
        assert len(c["ttft_runs_s"]) == 1, name
    cold, regen = cases["cold"], cases["regenerate"]
    assert cold["cached_tokens"] == 0 and cold["prefill_tokens"] == cold["prompt_tokens"]
    assert regen["prefill_tokens"] == 1  # all but the last prompt token, which gives the logits
    # The later the branch point, the more is reused: regenerating and switching beside the
    # second-to-last question keep more than a branch at question 2 does.
    early = cases["switch_early"]["cached_tokens"]
    for name in ("regenerate", "switch_sibling", "switch_back"):
        assert cases[name]["cached_tokens"] > early, name
    assert cases["edit_early"]["cached_tokens"] == early  # both keep the system prompt and turn 1
    # In memory only, but for the restart: its prefix came from disk, and it is the system prefix.
    assert all(c["cached_disk_tokens"] == 0 for n, c in cases.items() if n != "restart")
    disk = r["disk_cache"]
    restart = cases["restart"]
    assert restart["cached_disk_tokens"] == restart["cached_tokens"] == disk["shared_prefix_tokens"] > 0
    assert restart["cached_tokens"] < regen["cached_tokens"]
    assert disk["entries_saved_by_main"] == 1 and disk["bytes_saved"] > 0
    window = r["sliding_window"]  # the bundled Gemma 3 has one; this conversation fits inside it
    assert window is None or window["cells"] > r["main_prompt_tokens"]
    # Its checkpoints were taken (the prefill's chunk ends) but none was needed; not asked to, the
    # run measured no case with them off.
    marks = r["checkpoints"]
    assert window is None or (marks is not None and marks["saved"] > 0 and marks["bytes_each"] > 0
                              and marks["restored"] == marks["failed"] == 0)
    assert all(c["no_checkpoints"] is None for c in cases.values())
    text = table(r)
    assert all(name in text for name in CASES) and "only the shared chat prefix" in text
    assert window is None or "checkpoints of the window" in text
