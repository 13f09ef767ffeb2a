"""The server's steps while an online request arrives among online slots that decode (fake slots):
a short prefill runs alone, one step, so its TTFT is that step and not a step of every slot; a
long one is mixed with their tokens, so it never holds them for seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.slots.scheduler import PREFILL_FIRST_TOKENS, Scheduler, SlotState


@dataclass
class Req:
    custom_id: str
    online: bool = True


@dataclass(eq=False)
class Fake:
    req: Req
    state: SlotState = SlotState.DECODING
    shown: bool = True
    to_prefill: int = 0
    prompt: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)


def sched(online_first: bool = True) -> Scheduler:
    return Scheduler(8, lambda r, q: None, lambda *a: None, lambda r, q: None, keep_prefixes=online_first,
                     online_first=online_first, reserve=1)


def seat(s: Scheduler, *slots: Fake) -> None:
    for i, x in enumerate(slots):
        s.slots[i] = x


def ids(live) -> set[str]:
    return {x.req.custom_id for x in live}


def test_a_short_online_prefill_runs_alone_for_one_step():
    s = sched()
    seat(s, *(Fake(Req(f"d{i}")) for i in range(7)),
         Fake(Req("new"), SlotState.PREFILLING, shown=False, to_prefill=12))
    live, _ = s.step_slots()
    assert ids(live) == {"new"}
    s.slots[7].state, s.slots[7].shown = SlotState.DECODING, True  # it sampled and showed its text
    assert len(s.step_slots()[0]) == 8


def test_a_long_online_prefill_is_mixed_with_the_decoding_slots():
    s = sched()
    seat(s, Fake(Req("d0")), Fake(Req("d1")),
         Fake(Req("new"), SlotState.PREFILLING, shown=False, to_prefill=PREFILL_FIRST_TOKENS + 1))
    assert ids(s.step_slots()[0]) == {"d0", "d1", "new"}


def test_the_prefill_budget_counts_every_arrival_together():
    s = sched()
    half = PREFILL_FIRST_TOKENS // 2 + 1
    seat(s, Fake(Req("d0")), Fake(Req("a"), SlotState.PREFILLING, shown=False, to_prefill=half),
         Fake(Req("b"), SlotState.PREFILLING, shown=False, to_prefill=half))
    assert ids(s.step_slots()[0]) == {"d0", "a", "b"}


def test_a_slot_whose_first_tokens_showed_nothing_keeps_decoding():
    """Still waiting for its own first text (whitespace so far): it is not made to wait."""
    s = sched()
    seat(s, Fake(Req("quiet"), shown=False),
         Fake(Req("new"), SlotState.PREFILLING, shown=False, to_prefill=4))
    assert ids(s.step_slots()[0]) == {"quiet", "new"}


def test_without_online_first_nothing_waits():
    s = sched(online_first=False)
    seat(s, Fake(Req("d0")), Fake(Req("new"), SlotState.PREFILLING, shown=False, to_prefill=4))
    assert ids(s.step_slots()[0]) == {"d0", "new"}


def test_batch_slots_still_wait_for_every_online_first_text():
    s = sched()
    seat(s, Fake(Req("b0", online=False)), Fake(Req("d0")),
         Fake(Req("new"), SlotState.PREFILLING, shown=False, to_prefill=40))
    assert ids(s.step_slots()[0]) == {"d0", "new"}  # a long prefill: mixed with d0, the batch waits
