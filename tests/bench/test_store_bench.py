"""`llamadesk bench --store` builds, opens and searches a long conversation; the time is its figure."""

from __future__ import annotations

from app.bench import store as store_bench
from app.history.store import default_path


def test_store_bench_reports_a_full_conversation_and_its_timings():
    r = store_bench.run(2_000, rounds=2)
    assert r["messages"] == 2_000 and r["search_hits"] == 1
    timings = {k: v for k, v in r.items() if k.endswith("_s")}
    assert {"open_store_s", "load_conversation_s", "open_total_s", "search_s"} <= timings.keys()
    assert all(isinstance(v, float) and v >= 0 for v in timings.values())
    assert r["db_mb"] > 0
    assert not default_path().exists()  # built in a temporary folder: the user's history is untouched
