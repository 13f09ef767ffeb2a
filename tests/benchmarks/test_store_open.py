"""The 10,000-message conversation opens in under a second (the issue's promise)."""

from __future__ import annotations

from app.chat import bench_store


def test_ten_thousand_messages_open_in_under_a_second(capsys):
    r = bench_store.run(10_000, rounds=3)
    with capsys.disabled():
        print(f"\n10,000 messages: store open {r['open_store_s'] * 1000:.0f} ms + load "
              f"{r['load_conversation_s'] * 1000:.0f} ms = {r['open_total_s'] * 1000:.0f} ms "
              f"(worst {r['open_total_worst_s'] * 1000:.0f} ms; {r['db_mb']} MB database)")
    assert r["messages"] == 10_000 and r["search_hits"] == 1
    assert r["open_total_worst_s"] < 1.0
