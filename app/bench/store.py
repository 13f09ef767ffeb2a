"""How fast a long conversation opens: `llamadesk bench --store [--messages N] [--json]`.

The promise is that 10,000 messages open in under a second. "Open" is what
the window does on a click: open the store (integrity check, recovery of
cut-off replies) and load the conversation with every message, stats record
and out-of-context marker. The database is built in a temporary folder, so
the user's history is never touched.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from app.engine.stats import ReplyStats
from app.history import export
from app.history.records import StoredConversation, StoredMessage
from app.history.store import Store


def _stats(i: int) -> ReplyStats:
    return ReplyStats(ttft_s=0.1 + i % 7 / 100, prefill_tokens=40 + i % 50, cached_tokens=i % 300,
                      prefill_s=0.04, prefill_tok_s=950.0, decode_tokens=120, decode_s=1.2,
                      decode_tok_s=100.0, total_s=1.4, kv_used=i % 4096, n_ctx=4096, stop_reason="stop",
                      prompt_tokens=300, wall_decode_tok_s=97.0)


def build(path: Path, n: int) -> int:
    """A conversation of n messages (replies ~600 characters, with stats); returns its id."""
    t0 = 1_700_000_000.0
    reply = ("A reply of a typical length, with some `code` and a list:\n- one\n- two\n" * 8)[:600]
    conv = StoredConversation(0, "Benchmark", t0, t0 + n, "You are a benchmark.", "bench.gguf",
                              {"max_tokens": 512})
    for i in range(n):
        user = i % 2 == 0
        conv.messages.append(StoredMessage(
            "user" if user else "assistant", f"Question number {i}?" if user else f"{i}: {reply}",
            id=0, conversation_id=0, created_at=t0 + i, updated_at=t0 + i,
            stats=None if user else _stats(i), out_of_context=i < n // 4))
    with Store.open(path) as s:
        return s.import_conversation(conv)


def run(n: int = 10_000, rounds: int = 5) -> dict:
    with tempfile.TemporaryDirectory(prefix="llamadesk-bench-") as d:
        path = Path(d) / "llamadesk.db"
        t = time.perf_counter()
        cid = build(path, n)
        build_s = time.perf_counter() - t
        opens, loads, totals = [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            store = Store.open(path)
            t1 = time.perf_counter()
            conv = store.get_conversation(cid)
            t2 = time.perf_counter()
            store.close()
            opens.append(t1 - t0)
            loads.append(t2 - t1)
            totals.append(t2 - t0)
        assert len(conv.messages) == n
        with Store.open(path) as store:
            t = time.perf_counter()
            store.list_conversations()
            list_s = time.perf_counter() - t
            t = time.perf_counter()
            hits = store.search(f"number {n - 2}?", limit=50)
            search_s = time.perf_counter() - t
        t = time.perf_counter()
        export.render(conv, "html")
        html_s = time.perf_counter() - t
        return {
            "messages": n,
            "db_mb": round(path.stat().st_size / 1e6, 2),
            "build_s": round(build_s, 3),
            "open_store_s": round(statistics.median(opens), 4),
            "load_conversation_s": round(statistics.median(loads), 4),
            "open_total_s": round(statistics.median(totals), 4),
            "open_total_worst_s": round(max(totals), 4),
            "list_s": round(list_s, 4),
            "search_s": round(search_s, 4),
            "search_hits": len(hits),
            "render_html_s": round(html_s, 4),
        }
