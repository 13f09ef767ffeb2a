"""`llamadesk bench --store` builds, opens and searches a long conversation; the time is its figure."""

from __future__ import annotations

from app.bench import store as store_bench


def test_store_bench_reports_a_full_conversation_and_its_timings():
    r = store_bench.run(2_000, rounds=2)
    assert r["messages"] == 2_000 and r["search_hits"] == 1
    assert 0 < r["open_total_s"] <= r["open_total_worst_s"]
    assert r["db_mb"] > 0
