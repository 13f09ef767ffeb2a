"""The engine's scheduling policy on fake slots: no model, milliseconds a test.

`Host` plays BatchEngine's part at the scheduler's seams (prepare, start, the
end of a request), so these tests drive the same calls run() makes and check
what the policy decides: who gets a sequence and which one, what a step
carries, whether it may be cut short, and what the progress bar says.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.slots.scheduler import RATE_WINDOW_S, RunCounters, Scheduler, SlotState


@dataclass
class Req:
    custom_id: str
    online: bool = False
    tokens: list[int] = field(default_factory=lambda: [1, 2, 3])
    bad: bool = False  # its prompt cannot run: prepare records an error


@dataclass(eq=False)
class FakeSlot:
    seq: int
    req: Req
    cached: int = 0  # prompt tokens kept from the sequence's previous request
    state: SlotState = SlotState.PREFILLING
    shown: bool = False


class Host:
    """The engine's side of the seam, recording how each request ended."""

    def __init__(self, n_slots: int = 2, **kw):
        self.now = 100.0
        self.ended: list[tuple[str, str]] = []  # (custom_id, stop reason)
        self.started: list[tuple[str, int]] = []  # (custom_id, sequence)
        self.dropped_ids: list[str] = []  # cancelled while queued
        self.idles = 0
        self.sched = Scheduler(n_slots, self.prepare, self.start, self.dropped,
                               clock=lambda: self.now, idle_s=0, **kw)

    def prepare(self, req: Req, queued: float):
        if req.bad:
            self.end(req.custom_id, "error", "bad prompt")
            return None
        return list(req.tokens), ()

    def start(self, seq: int, req: Req, prepared, queued: float) -> FakeSlot:
        self.started.append((req.custom_id, seq))
        return FakeSlot(seq, req, cached=self.sched.take_kept(seq, prepared[0]))

    def dropped(self, req: Req, queued: float) -> None:
        self.dropped_ids.append(req.custom_id)
        self.end(req.custom_id, "cancelled")

    def end(self, custom_id: str, reason: str, error: str | None = None) -> None:
        self.ended.append((custom_id, reason))
        self.sched.counters.ended(reason, error)

    def finish(self, slot: FakeSlot, reason: str = "stop", kv: list[int] | None = None) -> bool:
        kept = self.sched.release(slot.seq, kv)
        self.end(slot.req.custom_id, reason)
        return kept

    def idle(self) -> None:
        """Only paused slots are busy: the user resumes (the lock is reentrant)."""
        self.idles += 1
        self.now += 1.0
        self.sched.resume()

    def turn(self) -> bool:
        return self.sched.next_turn(self.idle)

    def step(self) -> list[FakeSlot]:
        live, cancelled = self.sched.step_slots()
        for s in cancelled:
            self.finish(s, "cancelled")
        return live

    def busy(self) -> dict[str, int]:
        return {s.req.custom_id: seq for seq, s in enumerate(self.sched.slots) if s is not None}


def batch(*ids: str, **kw) -> list[Req]:
    return [Req(i, **kw) for i in ids]


# -- admission ------------------------------------------------------------------
def test_online_requests_are_admitted_before_batch_work_queued_earlier():
    h = Host(n_slots=1)
    h.sched.submit_many(batch("b0", "b1"))
    h.sched.submit_online(Req("o0"))
    h.sched.submit_online(Req("o1"))
    assert h.turn()
    assert h.started == [("o0", 0), ("o1", 1)]
    h.finish(h.sched.slots[0])
    h.finish(h.sched.slots[1])
    assert h.turn()
    # The reserved sequence (1) is free again, yet batch work waits for sequence 0.
    assert h.busy() == {"b0": 0}


def test_the_reserved_sequence_takes_only_online_work():
    h = Host(n_slots=2)
    h.sched.submit_many(batch("b0", "b1", "b2", "b3"))
    assert h.turn()
    assert h.busy() == {"b0": 0, "b1": 1} and h.sched.slots[2] is None
    h.sched.submit_online(Req("chat"))
    assert h.turn()
    assert h.busy()["chat"] == 2  # the next step, not after a whole batch request
    assert h.sched.figures(h.now)["queued"] == 2


def paused(n_slots: int) -> Host:
    """A run whose batch request b0 decodes in sequence 0, then is paused."""
    h = Host(n_slots=n_slots)
    h.sched.submit_many(batch("b0"))
    assert h.turn()
    h.sched.pause()
    return h


def test_a_paused_batch_still_admits_online_work_and_its_slots_wait():
    h = paused(n_slots=3)
    h.sched.submit_many(batch("b1"))
    h.sched.submit_online(Req("chat"))
    assert h.turn() and h.idles == 0  # the online request is runnable
    assert h.busy() == {"b0": 0, "chat": 1}  # b1 waits though batch sequence 2 is free
    assert [s.req.custom_id for s in h.step()] == ["chat"]
    h.finish(h.sched.slots[1])
    assert h.sched.figures(h.now)["paused"]
    # Only the paused b0 is busy: run() waits (idle) until the user resumes.
    assert h.turn() and h.idles == 1 and not h.sched.paused
    assert set(h.busy()) == {"b0", "b1"}


def test_a_request_whose_prompt_cannot_run_leaves_its_sequence_to_the_next():
    h = Host(n_slots=1)
    h.sched.submit_many([Req("bad", bad=True), Req("good")])
    assert h.turn()
    assert h.ended == [("bad", "error")] and h.busy() == {"good": 0}


def test_nothing_queued_or_busy_ends_the_run_and_wait_for_work_hears_a_submit():
    h = Host()
    assert not h.turn()
    assert not h.sched.wait_for_work(0.001)
    t = threading.Timer(0.01, lambda: h.sched.submit_many(batch("b0")))
    t.start()
    assert h.sched.wait_for_work(5)
    t.join()


def test_cancel_ends_the_run_drops_the_queue_and_the_next_run_starts_clean():
    h = Host(n_slots=1)
    h.sched.submit_many(batch("b0", "b1", "b2"))
    assert h.turn()
    h.sched.cancel()
    assert not h.turn()
    h.finish(h.sched.slots[0], "cancelled")  # run()'s finally ends the busy slots
    h.sched.end_run()
    assert h.sched.figures(h.now)["queued"] == 0 and not h.sched.cancelled
    h.sched.submit_many(batch("b3"))
    h.sched.begin_run()
    assert h.turn() and h.busy() == {"b3": 0}


# -- cancelling one request ------------------------------------------------------
def test_a_cancelled_queued_request_ends_as_cancelled_and_leaves_the_total():
    h = Host(n_slots=1)
    h.sched.submit_many(batch("b0", "b1", "b2"))
    h.sched.submit_online(Req("chat"))
    total = h.sched.counters.total
    h.sched.cancel_request("b2")
    h.sched.cancel_request("chat")
    assert h.turn()
    assert sorted(h.ended) == [("b2", "cancelled"), ("chat", "cancelled")]
    assert h.busy() == {"b0": 0} and all(cid != "b2" for cid, _ in h.started)
    c = h.sched.counters
    assert c.total == total - 2 and c.done == 0  # cancelled is not finished work
    assert h.sched.figures(h.now)["queued"] == 1


def test_a_cancelled_running_request_leaves_the_step_once():
    h = Host(n_slots=2)
    h.sched.submit_many(batch("b0", "b1"))
    assert h.turn()
    h.sched.cancel_request("b1")
    assert [s.req.custom_id for s in h.step()] == ["b0"]
    assert h.ended == [("b1", "cancelled")] and h.busy() == {"b0": 0}
    assert [s.req.custom_id for s in h.step()] == ["b0"] and len(h.ended) == 1


# -- which sequence --------------------------------------------------------------
def _kept(h: Host, seqs_tokens: dict[int, list[int]]) -> None:
    for seq, toks in seqs_tokens.items():
        h.sched.slots[seq] = FakeSlot(seq, Req(f"k{seq}"))
        assert h.sched.release(seq, toks)


def test_a_next_turn_goes_to_the_sequence_that_holds_its_history():
    h = Host(n_slots=3, keep_prefixes=True)
    _kept(h, {0: [7, 8], 1: [], 2: [1, 2, 3, 4, 9]})
    h.sched.submit_many([Req("turn2", tokens=[1, 2, 3, 4, 5, 6])])
    assert h.turn() and h.busy() == {"turn2": 2}
    assert h.sched.slots[2].cached == 4  # [1, 2, 3, 4] stay; only 5 and 6 are prefilled
    assert h.sched.take_kept(2, [1, 2, 3, 4, 5, 6]) == 0  # taken: the sequence keeps nothing after


def test_batch_work_never_takes_the_reserved_sequence_even_holding_its_prefix():
    h = Host(n_slots=2, keep_prefixes=True)
    _kept(h, {0: [9], 1: [9], 2: [1, 2, 3, 4]})
    h.sched.submit_many([Req("b", tokens=[1, 2, 3, 4, 5])])
    h.sched.submit_online(Req("chat", tokens=[1, 2, 3, 4, 5]))
    assert h.turn() and h.busy() == {"chat": 2, "b": 0}
    h.finish(h.sched.slots[2], kv=[1, 2, 3, 4, 5])
    h.sched.submit_many([Req("b2", tokens=[1, 2, 3, 4, 5])])
    assert h.turn() and h.busy()["b2"] == 1


def test_a_tie_goes_to_the_lowest_sequence():
    h = Host(n_slots=4, keep_prefixes=True)
    _kept(h, {0: [7], 1: [1, 2, 8], 2: [1, 2, 9], 3: []})
    assert h.sched.best_seq([0, 1, 2, 3], [1, 2, 3]) == 1
    assert h.sched.best_seq([2, 3], [1, 2, 3]) == 2
    assert h.sched.best_seq([0, 1, 2, 3], [5, 5]) == 0  # nothing shared anywhere


@given(st.lists(st.lists(st.integers(0, 3), max_size=5), min_size=1, max_size=6),
       st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_the_chosen_sequence_shares_the_longest_prefix_and_is_the_lowest_such(kept, toks):
    h = Host(n_slots=len(kept), keep_prefixes=True, reserve=0)
    _kept(h, dict(enumerate(kept)))

    def shared(seq: int) -> int:
        n = 0
        while n < min(len(kept[seq]), len(toks)) and kept[seq][n] == toks[n]:
            n += 1
        return n

    seq = h.sched.best_seq(list(range(len(kept))), toks)
    assert all(shared(seq) > shared(lower) for lower in range(seq))
    assert all(shared(seq) >= shared(other) for other in range(len(kept)))
    # One prompt token is always left to evaluate, so its logits give the first sample.
    assert h.sched.take_kept(seq, toks) == min(shared(seq), len(toks) - 1)


def test_without_kept_prefixes_nothing_is_kept_and_the_lowest_free_sequence_is_taken():
    h = Host(n_slots=3)
    h.sched.slots[2] = FakeSlot(2, Req("a"))
    assert not h.sched.release(2, [1, 2, 3])  # the engine must clear the sequence
    assert h.sched.best_seq([1, 2], [1, 2, 3]) == 1 and h.sched.take_kept(2, [1, 2, 3]) == 0


def test_a_failed_request_keeps_nothing_in_its_sequence():
    h = Host(n_slots=2, keep_prefixes=True)
    h.sched.slots[1] = FakeSlot(1, Req("a"))
    assert not h.sched.release(1, None)
    assert h.sched.slots[1] is None and h.sched.take_kept(1, [1, 2, 3]) == 0


# -- what a step carries -----------------------------------------------------------
def _running(h: Host, online: int, offline: int) -> list[FakeSlot]:
    h.sched.submit_many(batch(*(f"b{i}" for i in range(offline))))
    for i in range(online):
        h.sched.submit_online(Req(f"o{i}"))
    assert h.turn()
    return [s for s in h.sched.slots if s is not None]


def test_online_first_steps_carry_online_slots_until_each_has_shown_text():
    h = Host(n_slots=4, online_first=True)
    slots = _running(h, online=2, offline=2)
    online = [s for s in slots if s.req.online]
    assert {s.req.custom_id for s in h.step()} == {"o0", "o1"}
    online[0].shown = True
    assert {s.req.custom_id for s in h.step()} == {"o0", "o1"}  # o1 has not shown text yet
    online[1].shown = True
    assert len(h.step()) == 4


def test_without_online_first_every_step_carries_every_slot():
    h = Host(n_slots=3)
    _running(h, online=1, offline=2)
    assert len(h.step()) == 3


def test_paused_batch_slots_wait_even_once_online_text_is_shown():
    h = Host(n_slots=3, online_first=True)
    slots = _running(h, online=1, offline=2)
    h.sched.pause()
    for s in slots:
        s.shown = True
    assert [s.req.custom_id for s in h.step()] == ["o0"]


def _decoding(slots: list[FakeSlot]) -> list[FakeSlot]:
    for s in slots:
        s.state = SlotState.DECODING
    return slots


def test_a_step_of_batch_tokens_only_is_abortable_on_the_server():
    h = Host(n_slots=3, online_first=True)
    live = _decoding(_running(h, online=0, offline=2))
    assert h.sched.abortable(live)
    assert not h.sched.abortable(live[:1])  # one sequence: nothing to gain over finishing it
    live[1].state = SlotState.PREFILLING
    assert not h.sched.abortable(live)  # prompt chunks: more than one ubatch


def test_a_step_is_not_abortable_with_online_work_in_it():
    h = Host(n_slots=3, online_first=True)
    live = _decoding(_running(h, online=1, offline=2))
    assert h.sched.slots[3] is None and not h.sched.abortable(live)
    assert h.sched.abortable([s for s in live if not s.req.online])


def test_a_step_is_not_abortable_when_no_sequence_is_free():
    h = Host(n_slots=2, online_first=True)
    h.sched.submit_many(batch("b0", "b1"))
    assert h.turn()
    h.sched.submit_online(Req("chat"))
    assert h.turn()
    batch_only = _decoding([s for s in h.sched.slots if s is not None and not s.req.online])
    assert not h.sched.abortable(batch_only)  # an arriving request could not start anyway
    h.finish(h.sched.slots[2])
    assert h.sched.abortable(batch_only)


def test_no_step_is_abortable_without_online_first():
    h = Host(n_slots=3)
    assert not h.sched.abortable(_decoding(_running(h, online=0, offline=2)))


def test_online_waiting_follows_the_online_queue():
    h = Host(n_slots=1)
    assert not h.sched.online_waiting()
    h.sched.submit_online(Req("chat"))
    assert h.sched.online_waiting()
    assert h.turn() and not h.sched.online_waiting()


# -- progress ----------------------------------------------------------------------
def _steady(c: RunCounters, t0: float, t1: float, tok_s: float, dt: float = 0.25) -> float:
    t = t0
    while t < t1 - 1e-9:
        t += dt
        c.generated += round(tok_s * dt)
        c.stepped(t)
    return t


def test_the_rate_follows_the_last_window_and_the_average_the_whole_run():
    c = RunCounters(total=10, now=0.0)
    t = _steady(c, 0.0, 10.0, 100.0)
    t = _steady(c, t, 15.0, 20.0)
    f = c.figures(t)
    assert abs(f["tok_s"] - 20.0) < 1e-6  # the slowdown shows at once
    assert abs(f["avg_tok_s"] - c.generated / t) < 1e-9 and f["avg_tok_s"] > 50
    assert all(t - m[0] <= RATE_WINDOW_S for m in c.marks)


def test_the_window_keeps_two_marks_after_a_long_silence():
    c = RunCounters(total=1, now=0.0)
    _steady(c, 0.0, 1.0, 40.0)
    f = c.figures(60.0)  # no step for a minute (a long prefill, say)
    assert len(c.marks) == 2 and abs(f["tok_s"] - 40.0) < 1e-9  # the last two steps' rate


def test_no_figures_before_there_is_anything_to_measure():
    f = RunCounters(total=3, now=5.0).figures(6.0)
    assert f["tok_s"] is None and f["avg_tok_s"] is None and f["eta_s"] is None
    assert f["elapsed_s"] == 1.0


def test_eta_is_the_time_per_finished_request_times_those_left_and_paused_time_is_not_counted():
    c = RunCounters(total=8, now=0.0)
    c.paused_s = 4.0
    for reason, error in [("stop", None), ("length", None), ("error", "boom"), ("cancelled", None)]:
        c.ended(reason, error)
    f = c.figures(10.0)
    assert (f["done"], f["failed"]) == (3, 1)
    assert f["elapsed_s"] == 6.0 and abs(f["eta_s"] - 6.0 / 3 * 5) < 1e-9
    for _ in range(c.total - c.done):
        c.ended("stop", None)
    assert c.figures(10.0)["eta_s"] == 0  # every request done: nothing left to wait for


def test_progress_is_shown_at_most_every_interval_unless_forced():
    c = RunCounters(total=1, now=0.0)
    assert c.due(50.0, False) and not c.due(50.05, False)
    assert c.due(50.05, True) and c.due(50.3, False)


def test_a_wait_while_paused_counts_as_paused_time():
    h = paused(n_slots=1)
    ticks = itertools.count()
    h.sched.clock = lambda: 200.0 + 3.0 * next(ticks)  # each reading 3 s after the last
    h.idle = h.sched.cancel  # the user cancels the paused batch during the wait
    assert not h.turn()
    assert h.sched.counters.paused_s == 3.0


def test_a_wait_that_ends_resumed_is_not_paused_time():
    h = paused(n_slots=1)
    assert h.turn() and h.idles == 1  # Host.idle resumes
    assert h.sched.counters.paused_s == 0.0


def test_occupancy_counts_batch_sequences_and_online_work_apart():
    h = Host(n_slots=2)
    h.sched.submit_many(batch("b0", "b1", "b2"))
    assert h.turn()
    h.sched.submit_online(Req("chat"))
    assert h.turn()
    f = h.sched.figures(h.now)
    # The reserved sequence is not one of the n_slots the occupancy gauge counts.
    assert (f["busy_slots"], f["n_slots"], f["online_busy"], f["queued"], f["total"]) == (2, 2, 1, 1, 4)


# -- every request ends exactly once -----------------------------------------------
OPS = st.lists(st.one_of(
    st.tuples(st.just("submit"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("online"), st.booleans()),
    st.tuples(st.just("cancel_request"), st.integers(0, 30)),
    st.tuples(st.sampled_from(["pause", "resume", "turn", "step", "show"])),
    st.tuples(st.just("finish"), st.integers(0, 5)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS, st.integers(1, 3), st.booleans(), st.booleans())
def test_every_submitted_request_ends_exactly_once(ops, n_slots, online_first, keep_prefixes):
    h = Host(n_slots=n_slots, online_first=online_first, keep_prefixes=keep_prefixes)
    submitted: list[str] = []

    def new(online: bool, bad: bool = False) -> Req:
        r = Req(f"r{len(submitted)}", tokens=[len(submitted) % 3, 1], bad=bad)
        submitted.append(r.custom_id)
        return r

    def finish_live() -> None:
        for s in h.step():
            s.state = SlotState.DECODING
            h.finish(s, kv=[1, 2])

    for op, *args in ops:
        if op == "submit":
            h.sched.submit_many([new(False, bad=args[1] and i == 0) for i in range(args[0])])
        elif op == "online":
            h.sched.submit_online(new(True, bad=args[0]))
        elif op == "cancel_request":
            h.sched.cancel_request(f"r{args[0]}")
        elif op in ("pause", "resume"):
            getattr(h.sched, op)()
        elif op == "turn":
            h.turn()
        elif op == "step":
            h.step()
        elif op == "show":
            for s in h.sched.slots:
                if s is not None:
                    s.shown = True
        elif op == "finish" and (busy := [s for s in h.sched.slots if s is not None]):
            h.finish(busy[args[0] % len(busy)])
    h.sched.resume()
    for _ in range(1000):
        if not h.turn():
            break
        finish_live()
    else:
        raise AssertionError("the run never ended")
    counts = Counter(cid for cid, _ in h.ended)
    assert set(counts) == set(submitted) and set(counts.values()) <= {1}
    assert all(s is None for s in h.sched.slots)
    # The total takes back only the requests cancelled before they had a sequence.
    assert h.sched.counters.total == len(submitted) - len(h.dropped_ids)


# -- no llama.cpp --------------------------------------------------------------------
def _module_imports(name: str, seen: set[str]) -> set[str]:
    """Every module `name` imports, following the app's own modules (read, not run)."""
    if name in seen:
        return set()
    seen.add(name)
    out: set[str] = set()
    parent = name.rpartition(".")[0]
    if parent:
        out |= _module_imports(parent, seen)
    origin = importlib.util.find_spec(name).origin
    for node in ast.walk(ast.parse(Path(origin).read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for n in names:
            out.add(n)
            if n.split(".")[0] == "app":
                out |= _module_imports(n, seen)
    return out


def test_the_scheduler_imports_neither_llama_cpp_nor_ctypes():
    roots = {n.split(".")[0] for n in _module_imports("app.slots.scheduler", set())}
    assert "app" in roots
    assert not roots & {"llama_cpp", "ctypes", "numpy"}, roots


def test_a_stop_that_arrives_as_its_request_ends_is_not_kept_for_good():
    """The chat's Stop can land between a reply's last token and its slot's release."""
    h = Host(1)
    h.sched.submit_online(Req("chat-1", online=True))
    assert h.turn()
    (slot,) = h.step()
    h.sched.cancel_request("chat-1")  # the user pressed Stop as the reply finished
    h.finish(slot)
    h.sched.submit_online(Req("chat-1", online=True))  # an id seen again must not start cancelled
    assert h.turn()
    live, cancelled = h.sched.step_slots()
    assert [s.req.custom_id for s in live] == ["chat-1"] and cancelled == []


# -- speculation ------------------------------------------------------------------
def test_a_slot_decodes_alone_only_while_no_other_slot_decodes_and_no_request_waits():
    h = Host(n_slots=3, online_first=True)
    (o0,) = _running(h, online=1, offline=0)
    assert h.sched.alone([o0]) is None  # still prefilling: nothing to check guesses with
    _decoding([o0])
    assert h.sched.alone([o0]) is o0
    h.sched.submit_online(Req("o1"))
    assert h.sched.alone([o0]) is None  # a request waits: this step would keep it waiting
    assert h.turn()
    o1 = h.sched.slots[1]
    assert h.sched.alone([o0]) is None and h.sched.alone([o0, o1]) is None  # shared, or about to be
    h.finish(o1)
    h.sched.submit_many(batch("b0"))
    assert h.turn()
    assert h.sched.alone([o0]) is None  # a batch request decodes beside it
    h.sched.pause()
    assert h.sched.alone([o0]) is o0  # paused, it holds its sequence but shares no step
    h.sched.submit_many(batch("b1"))
    assert h.sched.alone([o0]) is o0  # queued batch work waits for the resume either way


def test_batch_work_queued_for_the_one_busy_sequence_leaves_it_alone():
    h = Host(n_slots=1, online_first=True)
    h.sched.submit_many(batch("b0", "b1"))
    assert h.turn()
    (b0,) = _decoding(h.step())
    assert h.sched.alone([b0]) is b0  # b1 waits for b0's sequence: it could not share this step
