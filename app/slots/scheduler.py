"""The multi-sequence engine's scheduling policy, kept apart from llama.cpp.

Which request gets which sequence, which slots a step carries and what the
progress bar says decide latency and fairness, yet inside the decode loop they
could only be tested by decoding with a real model. Here they are plain Python
over anything that has a slot's few fields (SlotView), so tests drive them
with fake slots in milliseconds; BatchEngine keeps the mechanics (the
llama_batch, llama_decode and its abort, sampling, KV sequence edits) and
calls in at the seams: `next_turn` before a step, `step_slots` and
`abortable` for it, `take_kept` and `release` around a sequence's use.

Two queues: online requests (a chat turn, a server's client on a socket) and
offline work (a batch file, the Batch API; "batch work" elsewhere, a name this
module leaves to llama_batch). Online work always goes first and has sequences
of its own (ONLINE_RESERVE), because a person is waiting on it; offline work
fills what is left, and pausing stops only offline work.

Threads: submit_many, submit_online, pause, resume, cancel, cancel_request and
wait_for_work take only this object's condition lock, so any thread may call
them; everything else runs on the engine's run() thread, the one that owns the
llama context, and the callbacks it is given are called there.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from app.engine.control import common_prefix

# Sequences kept free for online requests. With every batch slot busy and the
# batch started in lockstep, "the next free slot" comes only after a whole
# request ends; a reserved sequence makes it the next decode step instead.
ONLINE_RESERVE = 1
PROGRESS_EVERY_S = 0.2
# A prefix shorter than this is evaluated rather than copied from another sequence: a copy
# between per-slot streams moves the whole stream, a few tokens' worth of prefill.
MIN_SHARED_TOKENS = 16
# An online request's prefill of at most this many tokens runs in a step of its own, the online
# slots already decoding waiting that one step; a longer one shares steps with them.
PREFILL_FIRST_TOKENS = 32
RATE_WINDOW_S = 3.0

Prepared = tuple[list[int], tuple[str, ...]]  # a prompt's tokens and its stop strings


class SlotState(Enum):
    PREFILLING = "prefilling"  # prompt chunks still to evaluate
    DECODING = "decoding"  # the last sampled token (`pending`) is fed on the next step
    FINISHED = "finished"  # the result is made; the sequence is free


class RequestView(Protocol):
    custom_id: str
    online: bool


class SlotView(Protocol):
    """What the policy reads of a busy sequence (app.slots.slot.Slot has it)."""

    @property
    def req(self) -> RequestView: ...
    @property
    def state(self) -> SlotState: ...
    @property
    def shown(self) -> bool: ...  # its first visible text went out
    @property
    def prompt(self) -> Sequence[int]: ...
    @property
    def held(self) -> Sequence[int]: ...  # the tokens its sequence holds now
    @property
    def to_prefill(self) -> int: ...  # prompt tokens it has still to evaluate itself


@dataclass(frozen=True)
class Share:
    """Where a new prompt can take its prefix from: `seq` holds its first `n` tokens now
    (`ready`), or is a slot still prefilling that will."""

    seq: int
    n: int
    ready: bool


R = TypeVar("R", bound=RequestView)
S = TypeVar("S", bound=SlotView)


class RunCounters:
    """One run's counts and rates. Times come in as arguments, so the arithmetic is
    tested on a clock of the test's own; the rate is over a rolling window because
    the run's average hides a batch slowing down as its sequences grow."""

    def __init__(self, total: int, now: float):
        self.total = total  # submitted, this run (a request cancelled while queued is taken back)
        self.done = self.failed = self.generated = 0
        self.t0 = now
        self.paused_s = 0.0
        self.last_shown = 0.0
        self.marks: deque[tuple[float, int]] = deque()  # (time, generated) after each step

    def ended(self, stop_reason: str, error: str | None) -> None:
        """A cancelled request is no finished work: the bar counts it neither done nor failed."""
        if stop_reason != "cancelled":
            self.done += 1
            self.failed += error is not None

    def stepped(self, now: float) -> None:
        self.marks.append((now, self.generated))

    def due(self, now: float, force: bool) -> bool:
        """At most one progress record per PROGRESS_EVERY_S unless forced."""
        if not force and now - self.last_shown < PROGRESS_EVERY_S:
            return False
        self.last_shown = now
        return True

    def figures(self, now: float) -> dict:
        marks = self.marks
        while len(marks) > 2 and now - marks[0][0] > RATE_WINDOW_S:
            marks.popleft()
        rate = None
        if len(marks) >= 2 and marks[-1][0] > marks[0][0]:
            rate = (marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0])
        elapsed = max(1e-9, now - self.t0 - self.paused_s)
        eta = elapsed / self.done * max(0, self.total - self.done) if self.done else None
        return {"done": self.done, "failed": self.failed, "total": self.total,
                "generated": self.generated, "elapsed_s": elapsed, "tok_s": rate,
                "avg_tok_s": self.generated / elapsed if self.generated else None, "eta_s": eta}


class Scheduler(Generic[R, S]):
    """The queues and the sequences' occupancy. `prepare(req, queued)` gives a request's
    prompt or None (after recording why it cannot run), `start(seq, req, prepared, queued)`
    makes its slot (None: it could not, and said why), and `dropped(req, queued)` reports a
    request cancelled while queued.
    `n_slots` sequences take any work; the `reserve` after them take only online work."""

    def __init__(self, n_slots: int, prepare: Callable[[R, float], Prepared | None],
                 start: Callable[[int, R, Prepared, float], S | None], dropped: Callable[[R, float], None],
                 keep_prefixes: bool = False, online_first: bool = False, reserve: int = ONLINE_RESERVE,
                 clock: Callable[[], float] = time.perf_counter, idle_s: float = PROGRESS_EVERY_S):
        self.n_slots = n_slots
        self.keep_prefixes = keep_prefixes  # a finished request's tokens stay in its sequence
        self.online_first = online_first  # the server's policy; the chat-during-batch path keeps sharing
        self._prepare, self._start, self._dropped = prepare, start, dropped
        self.clock, self.idle_s = clock, idle_s
        self.cv = threading.Condition()
        self._online: deque[tuple[R, float]] = deque()
        self._offline: deque[tuple[R, float]] = deque()
        self._drop: set[str] = set()  # custom_ids to cancel, queued or running
        self.paused = self.cancelled = False
        self.slots: list[S | None] = [None] * (n_slots + reserve)  # by sequence; never rebound
        self.kept: list[list[int]] = [[] for _ in self.slots]  # each free sequence's tokens in the KV
        self.counters = RunCounters(0, clock())

    # -- any thread ---------------------------------------------------------
    def submit_many(self, reqs: Iterable[R]) -> None:
        now = self.clock()
        with self.cv:
            for r in reqs:
                self._offline.append((r, now))
                self.counters.total += 1
            self.cv.notify_all()

    def submit_online(self, req: R) -> None:
        req.online = True
        with self.cv:
            self._online.append((req, self.clock()))
            self.counters.total += 1
            self.cv.notify_all()

    def _set(self, **flags: bool) -> None:
        with self.cv:
            for k, v in flags.items():
                setattr(self, k, v)
            self.cv.notify_all()

    def pause(self) -> None:
        self._set(paused=True)

    def resume(self) -> None:
        self._set(paused=False)

    def cancel(self) -> None:
        self._set(cancelled=True)

    def cancel_request(self, custom_id: str) -> None:
        with self.cv:
            self._drop.add(custom_id)
            self.cv.notify_all()

    def wait_for_work(self, timeout: float) -> bool:
        with self.cv:
            if not (self._offline or self._online):
                self.cv.wait(timeout)
            return bool(self._offline or self._online)

    def online_waiting(self) -> bool:
        """Read without the lock: llama.cpp's abort callback asks it at every graph node."""
        return bool(self._online)

    # -- run()'s thread -----------------------------------------------------
    def begin_run(self) -> None:
        with self.cv:
            self.counters = RunCounters(len(self._offline) + len(self._online), self.clock())

    def end_run(self) -> None:
        """After the engine has ended its busy slots: a cancelled run drops what is queued."""
        with self.cv:
            if self.cancelled:
                self._offline.clear()
                self._online.clear()
            self.cancelled = False

    def next_turn(self, idle: Callable[[], None]) -> bool:
        """Admit what fits; True when a step has work, False when run() should end. While
        only paused slots are busy it calls `idle` (under the lock) and waits."""
        with self.cv:
            while not self.cancelled:
                self._admit()
                if not any(s is not None for s in self.slots) and not self._online and not self._offline:
                    return False
                if any(s is not None and (s.req.online or not self.paused) for s in self.slots):
                    return True
                idle()
                t = self.clock()
                self.cv.wait(self.idle_s)
                if self.paused:
                    self.counters.paused_s += self.clock() - t
            return False

    def _admit(self) -> None:
        """Fill free slots: online requests first, then offline work (unless paused).
        The reserved sequences take only online work."""
        if self._drop:
            self._offline = deque(x for x in self._offline if not self._dropped_queued(x))
            self._online = deque(x for x in self._online if not self._dropped_queued(x))
        while True:
            free = [seq for seq, s in enumerate(self.slots) if s is None]
            if not free:
                return
            if self._online:
                req, queued = self._online.popleft()
            elif any(seq < self.n_slots for seq in free) and self._offline and not self.paused:
                req, queued = self._offline.popleft()
                free = [seq for seq in free if seq < self.n_slots]
            else:
                return
            prepared = self._prepare(req, queued)
            if prepared is None:
                continue  # recorded as an error result
            seq = self.best_seq(free, prepared[0])
            self.slots[seq] = self._start(seq, req, prepared, queued)  # None: recorded as an error

    def _dropped_queued(self, item: tuple[R, float]) -> bool:
        """A queued request cancelled before it got a slot ends as a "cancelled" result, so
        whoever waits for it (a chat turn, a server's client) hears that it ended."""
        req, queued = item
        if req.custom_id not in self._drop:
            return False
        self._drop.discard(req.custom_id)
        self.counters.total -= 1
        self._dropped(req, queued)
        return True

    def best_seq(self, free: list[int], toks: list[int]) -> int:
        """The free sequence whose kept tokens share the longest prefix with `toks`, the lowest
        on a tie: llama.cpp attends over the span of KV streams from the lowest to the highest
        sequence a step carries, so a turn parked in the last sequence while clients use the
        first few makes every step attend over all of them (bench --serve measured it)."""
        if not self.keep_prefixes:
            return free[0]
        return max(free, key=lambda seq: common_prefix(self.kept[seq], toks))

    def take_kept(self, seq: int, toks: list[int]) -> int:
        """How many of `seq`'s kept tokens `toks` can reuse; the sequence keeps none after.
        One prompt token is always left to evaluate: its logits give the first sample."""
        kept, self.kept[seq] = self.kept[seq], []
        return min(common_prefix(kept, toks), len(toks) - 1) if self.keep_prefixes else 0

    def share_source(self, seq: int, toks: Sequence[int], own: int, wait: bool = True) -> Share | None:
        """Another sequence that holds more of `toks`' prefix than the `own` tokens `seq` keeps,
        by at least MIN_SHARED_TOKENS (the one sharing the most, the lowest on a tie), or None.

        A busy slot counts with what it holds; a free sequence with what it keeps. With `wait`,
        a slot still prefilling counts with the prompt it will hold, and is chosen only when
        it will give at least MIN_SHARED_TOKENS more than any ready sequence: several
        requests that arrive together with one preamble then evaluate it once, the others
        waiting for it. One prompt token is always left to evaluate, for its logits."""
        limit = len(toks) - 1
        ready: tuple[int, int] = (0, -1)  # (tokens, sequence)
        later: tuple[int, int] = (0, -1)
        for j, s in enumerate(self.slots):
            if j == seq:
                continue
            held = self.kept[j] if s is None else s.held
            n = min(common_prefix(held, toks), limit)
            if n > ready[0]:
                ready = (n, j)
            if wait and s is not None and s.state is SlotState.PREFILLING:
                m = min(common_prefix(s.prompt, toks), limit)
                if m > later[0]:
                    later = (m, j)
        if wait and later[0] >= max(ready[0], own) + MIN_SHARED_TOKENS:
            return Share(later[1], later[0], False)
        if ready[0] >= own + MIN_SHARED_TOKENS:
            return Share(ready[1], ready[0], True)
        return None

    def release(self, seq: int, kv_tokens: list[int] | None) -> bool:
        """Free the sequence; True when its KV stays for a later prefix (`kv_tokens`, exactly
        what it holds, None after an error), False when the engine must clear it."""
        keep = self.keep_prefixes and kv_tokens is not None
        if keep and kv_tokens is not None:
            self.kept[seq] = kv_tokens
        slot, self.slots[seq] = self.slots[seq], None
        if slot is not None and self._drop:
            with self.cv:  # a stop that came as it ended would otherwise stay in the set for good
                self._drop.discard(slot.req.custom_id)
        return keep

    def step_slots(self) -> tuple[list[S], list[S]]:
        """The slots the next step may advance, and those to end as cancelled first.
        Paused offline slots wait; so do all offline slots, under `online_first`, until
        every online request has shown its first text: a step that also carries every
        offline slot's token takes longer, and that is the online request's TTFT. For the
        same reason online slots that decode wait one step while a short online prefill
        (PREFILL_FIRST_TOKENS at most) runs alone; a longer one is mixed with their tokens
        instead, so it never holds them for seconds (chunked prefill's reason)."""
        live = [s for s in self.slots if s is not None and (s.req.online or not self.paused)]
        if self.online_first and any(s.req.online and not s.shown for s in live):
            live = [s for s in live if s.req.online]
            arriving = [s for s in live if s.state is SlotState.PREFILLING]
            decoding = [s for s in live if s.state is SlotState.DECODING and s.shown]
            if arriving and decoding and sum(s.to_prefill for s in arriving) <= PREFILL_FIRST_TOKENS:
                live = [s for s in live if all(s is not d for d in decoding)]
        cancelled: list[S] = []
        if self._drop:
            with self.cv:
                for s in live:
                    if s.req.custom_id in self._drop:
                        self._drop.discard(s.req.custom_id)
                        cancelled.append(s)
        return [s for s in live if all(s is not c for c in cancelled)], cancelled

    def abortable(self, live: list[S]) -> bool:
        """Whether the step over `live` may be cut short when an online request arrives: only
        the server's steps of offline tokens, one per sequence, which are one ubatch that
        llama.cpp can abort between graph nodes and remove whole from the KV cache, and only
        while a sequence is free for the arrival. The check is a Python callback per graph
        node, so no other step carries it."""
        return (self.online_first and len(live) > 1
                and all(s.state is SlotState.DECODING and not s.req.online for s in live)
                and any(s is None for s in self.slots))

    def alone(self, live: list[S]) -> S | None:
        """The slot the step over `live` carries alone, when nothing could share the step: no other
        busy sequence that decodes and no request waiting that a sequence is free for. Only such a
        slot speculates (app.slots.speculation): a step that carries other slots' tokens already
        keeps the cores busy, and a check's extra rows would slow every one of them. Reads the
        queues without the lock, as online_waiting does: an arrival it misses waits one check."""
        if len(live) != 1 or live[0].state is not SlotState.DECODING:
            return None
        offline_fits = not self.paused and any(s is None for s in self.slots[:self.n_slots])
        if self._online or (self._offline and offline_fits):
            return None
        if any(s is not None and s is not live[0] and (s.req.online or not self.paused) for s in self.slots):
            return None
        return live[0]

    def figures(self, now: float) -> dict:
        """BatchProgress's fields but the ceiling's, which need the model's limits."""
        return {**self.counters.figures(now), "queued": len(self._offline) + len(self._online),
                "busy_slots": sum(s is not None for s in self.slots[:self.n_slots]), "n_slots": self.n_slots,
                "online_busy": sum(s is not None and s.req.online for s in self.slots), "paused": self.paused}
