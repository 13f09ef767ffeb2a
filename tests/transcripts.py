"""A conversation with branches, and comparing JSON transcripts across an import.

An import gives the conversation and its messages new ids.

A version 2 document names each message by its id in the database that wrote it, and its parent
and the conversation's active leaf by those ids. Two documents describe the same conversation when
they are equal once each id is replaced by the position of its message in the document (and the
export's time and the conversation's own id, which are informational, are left out).
"""

from __future__ import annotations

import copy

from app.engine.stats import ReplyStats
from app.history.store import Store


def by_position(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc.pop("exported_at", None)
    c = doc["conversation"]
    c.pop("id", None)
    msgs = c["messages"]
    where = {m["id"]: i for i, m in enumerate(msgs) if "id" in m}
    for m in msgs:
        if "id" in m:
            m["id"] = where[m["id"]]
        if m.get("parent_id") is not None:
            m["parent_id"] = where[m["parent_id"]]
    if c.get("active_leaf") is not None:
        c["active_leaf"] = where[c["active_leaf"]]
    return doc


def shape(conv) -> list[int | None]:
    """A loaded conversation's tree as the position of each message's parent (None: a first one)."""
    where = {m.id: i for i, m in enumerate(conv.tree)}
    return [where.get(m.parent_id) if m.parent_id is not None else None for m in conv.tree]


def stats(n: int) -> ReplyStats:
    return ReplyStats(ttft_s=0.1 * n, prefill_tokens=10 + n, cached_tokens=n, prefill_s=0.01,
                      prefill_tok_s=900.0, decode_tokens=5 + n, decode_s=0.05, decode_tok_s=100.0 + n,
                      total_s=0.6, kv_used=15 + n,
                      n_ctx=512, stop_reason="stop", prompt_tokens=10 + 2 * n, wall_decode_tok_s=None)


def branched(s: Store) -> int:
    """Five turns; the second question edited (its own reply); the last reply regenerated twice,
    the second of those edited by hand; shown: the first branch, down its second regeneration."""
    cid, ids = None, []
    for n in range(1, 6):
        cid, q, r = s.begin_turn(cid, f"question {n}")
        s.finish_reply(r, f"answer {n}", stats(n))
        ids += [q, r]
    _c, _q2b, r2b = s.begin_turn(cid, "question 2, edited", parent_id=ids[1])
    s.finish_reply(r2b, "answer 2b", stats(20))
    again = []
    for n in (1, 2):
        r = s.begin_reply(cid, parent_id=ids[8])
        s.finish_reply(r, f"answer 5, again {n}", stats(50 + n))
        again.append(r)
    s.show_branch(cid, again[0])
    return cid
