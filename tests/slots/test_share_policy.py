"""Where a new prompt takes its prefix from (Scheduler.share_source), on fake slots: no model.

The engine side (the copy, the wait, the disk) is tested with the real model in
test_prefix_sharing.py; here only the choice: which sequence, how many tokens,
now or after a slot still prefilling has evaluated them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.slots.scheduler import MIN_SHARED_TOKENS, Scheduler, Share, SlotState

PRE = list(range(1000, 1100))  # a 100-token preamble


@dataclass
class Req:
    custom_id: str
    online: bool = True


@dataclass(eq=False)
class Fake:
    prompt: list[int]
    prefilled: int = 0
    fed: list[int] = field(default_factory=list)
    state: SlotState = SlotState.PREFILLING
    shown: bool = False
    req: Req = field(default_factory=lambda: Req("r"))

    @property
    def held(self) -> list[int]:
        return self.prompt[:self.prefilled] + self.fed


def sched(n: int = 4, keep: bool = True) -> Scheduler:
    return Scheduler(n, lambda r, q: None, lambda *a: None, lambda r, q: None, keep_prefixes=keep,
                     online_first=True, reserve=1)


def test_a_slot_that_holds_the_preamble_is_copied_from_now():
    s = sched()
    s.slots[0] = Fake([*PRE, 1, 2, 3], prefilled=103, fed=[7, 8], state=SlotState.DECODING)
    assert s.share_source(1, [*PRE, 4, 5], own=0) == Share(0, 100, True)


def test_a_slot_still_prefilling_the_preamble_is_waited_for():
    """Several requests that arrive together with one preamble evaluate it once."""
    s = sched()
    s.slots[2] = Fake([*PRE, 1, 2, 3], prefilled=0)
    assert s.share_source(0, [*PRE, 4, 5], own=0) == Share(2, 100, False)
    assert s.share_source(0, [*PRE, 4, 5], own=0, wait=False) is None  # nothing is held yet


def test_waiting_must_give_much_more_than_what_is_held_now():
    s = sched()
    s.slots[0] = Fake([*PRE, 1, 2, 3], prefilled=90)  # holds 90 of the 100 now
    got = s.share_source(1, [*PRE, 4], own=0)
    assert got == Share(0, 90, True)  # 10 more later is not worth the wait
    s.slots[0] = Fake([*PRE, 1, 2, 3], prefilled=40)
    assert s.share_source(1, [*PRE, 4], own=0) == Share(0, 100, False)


def test_a_free_sequences_kept_tokens_are_a_source_too():
    s = sched()
    s.kept[3] = [*PRE, 9, 9, 9]
    assert s.share_source(0, [*PRE, 4], own=0) == Share(3, 100, True)


def test_nothing_is_shared_when_the_own_kept_prefix_is_as_long():
    s = sched()
    s.slots[1] = Fake([*PRE, 1], prefilled=101, state=SlotState.DECODING)
    assert s.share_source(0, [*PRE, 4], own=100) is None
    assert s.share_source(0, [*PRE, 4], own=100 - MIN_SHARED_TOKENS) == Share(1, 100, True)


def test_a_short_common_prefix_is_evaluated_rather_than_copied():
    s = sched()
    short = PRE[:MIN_SHARED_TOKENS - 1]
    s.slots[1] = Fake([*short, 1], prefilled=MIN_SHARED_TOKENS, state=SlotState.DECODING)
    assert s.share_source(0, [*short, 4], own=0) is None


def test_one_prompt_token_is_always_left_to_evaluate():
    s = sched()
    s.slots[1] = Fake(PRE, prefilled=100, fed=[5], state=SlotState.DECODING)
    assert s.share_source(0, list(PRE), own=0) == Share(1, 99, True)


def test_the_lowest_sequence_wins_a_tie_and_the_longest_prefix_wins_overall():
    s = sched()
    s.slots[1] = Fake([*PRE, 1], prefilled=101, state=SlotState.DECODING)
    s.slots[2] = Fake([*PRE, 1], prefilled=101, state=SlotState.DECODING)
    assert s.share_source(0, [*PRE, 2], own=0) == Share(1, 100, True)
    s.slots[3] = Fake([*PRE, 2, 2], prefilled=102, state=SlotState.DECODING)
    assert s.share_source(0, [*PRE, 2, 2, 7], own=0) == Share(3, 102, True)


def test_the_sequence_itself_is_never_its_own_source():
    s = sched()
    s.kept[0] = [*PRE, 1]
    assert s.share_source(0, [*PRE, 2], own=0) is None
