"""Every count the Batch window shows, from one source: the plan of the run and its events.

The engine's BatchProgress counts whatever it was given (a chat turn routed
into the batch included), is throttled to a few records a second, and never
counted a running request cancelled by id as done, so its figures and the
rows of the table could disagree ("0 / 12" beside two rows that say ok, and a
bar that never reached its end). Here the total is the requests the run
submitted (BatchPlan, known before the first decode), a request is running
from its RequestStarted and finished at its RequestDone, whatever its
status: the bar, the occupancy, the queue, the table and the summary all
count the same ids. Only the rate, the token count and the ceiling still
come from BatchProgress, which alone measures them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.slots.types import RequestDone, RequestStarted, SlotResult


@dataclass(frozen=True)
class Planned:
    """One line of the input: its id, line number and prompt (what the table's rows show)."""

    custom_id: str
    line: int
    prompt: str
    error: str | None = None  # the line could not be read: written as an error, not decoded


@dataclass
class BatchPlan:
    items: list[Planned]
    skipped: int  # already in the output from an earlier run

    @property
    def submitted(self) -> list[Planned]:
        return [it for it in self.items if it.error is None]


@dataclass
class BatchCounts:
    total: int = 0
    started: set[str] = field(default_factory=set)
    results: dict[str, SlotResult] = field(default_factory=dict)
    _ids: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, plan: BatchPlan) -> BatchCounts:
        ids = {it.custom_id for it in plan.submitted}
        return cls(total=len(ids), _ids=ids)

    def feed(self, ev) -> SlotResult | None:
        """Take an event; the result it finished, if it is one of this run's requests (a chat
        turn answered in the batch's slot is not)."""
        if isinstance(ev, RequestStarted) and ev.custom_id in self._ids:
            self.started.add(ev.custom_id)
        elif isinstance(ev, RequestDone) and ev.result.custom_id in self._ids:
            self.results[ev.result.custom_id] = ev.result
            return ev.result
        return None

    @property
    def done(self) -> int:
        return len(self.results)

    @property
    def running(self) -> int:
        return len(self.started - self.results.keys())

    @property
    def queued(self) -> int:
        return self.total - len(self.started | self.results.keys())

    @property
    def failed(self) -> int:
        return sum(r.stats.error is not None for r in self.results.values())

    @property
    def cancelled(self) -> int:
        return sum(r.stats.stop_reason == "cancelled" for r in self.results.values())
