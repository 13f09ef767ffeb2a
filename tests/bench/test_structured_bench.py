"""bench --structured on a few of its schemas: both paths run, every reply is judged, figures are
reported (their size is the benchmark's business, not this test's)."""

from __future__ import annotations

from app.bench.structured import run_structured_bench
from app.bench.structured_set import CASES
from app.engine.loader import LoadOptions


def test_the_structured_bench_judges_each_reply_on_both_paths(model_path):
    picked = [c for c in CASES if c[0] in ("person", "enum", "tags")]
    r = run_structured_bench(model_path, LoadOptions(n_ctx=1024), picked)
    assert r["schemas"] == 3 and not r["refused"]
    for side in ("llguidance", "gbnf"):
        s = r[side]
        assert 0 <= s["valid_pct"] <= 100 and s["mask_p50_ms"] > 0 and s["compile_ms_p50"] > 0
        assert s["decode_ratio_median"] > 0
    assert r["llguidance"]["valid_pct"] == 100.0  # bounded schemas, greedy: the grammar guarantees it
    assert {row["schema"] for row in r["per_schema"]} == {"person", "enum", "tags"}
    assert all("gbnf" in row and row["tokens"] > 0 for row in r["per_schema"])
