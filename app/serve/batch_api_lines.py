"""A Batch API chat line in flight: its n choices as slot requests, and what its record is.

A line asking for n choices is n slot requests, seeded as the online endpoint seeds them, and
one record once all have ended; a choice that failed fails its line, as it fails an online
request, and a request the engine ended unasked is an error of its line, never a line left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.batch_jsonl.requests import InputItem
from app.slots.types import SlotRequest, SlotResult, SlotStats


@dataclass
class Line:
    """A chat line in flight: its choices' host ids, the results in so far, whether its record
    is written (or, the server stopping, left for the next start)."""

    item: InputItem
    rids: list[str] = field(default_factory=list)
    done: dict[int, SlotResult] = field(default_factory=dict)
    recorded: bool = False


def choices(it: InputItem) -> list[SlotRequest]:
    """A line's n slot requests, seeded as the online endpoint seeds its choices (seed + j), so a
    seeded line answers as the same request sent online does."""
    first = it.request
    assert first is not None  # a chat line that runs has its request
    seed = first.settings.seed  # None: each choice its own random seed
    return [replace(first) if j == 0 else replace(first, settings=replace(
        first.settings, seed=None if seed is None else (seed + j) & 0xFFFFFFFF)) for j in range(it.n)]


def failure(res: SlotResult) -> SlotStats | None:
    """The stats of an error record when the result is a failure (an error, or a reply the engine
    says stopped on one), else None: a reply cut short by an error is never an answer."""
    st = res.stats
    if st.error is None and st.stop_reason != "error":
        return None
    if st.error is None:
        return replace(st, error="the reply failed while it was being decoded",
                       error_kind=st.error_kind or "generation_failed")
    return st


def ended_unasked(res: SlotResult) -> SlotResult:
    """A request the engine ended as cancelled when nobody cancelled it: its engine stopped (the
    server's log says why). An error of its line, not a line silently left out."""
    st = replace(res.stats, stop_reason="error", error_kind="generation_failed",
                 error="the server's engine stopped before this request finished (its log says why)")
    return replace(res, stats=st)
