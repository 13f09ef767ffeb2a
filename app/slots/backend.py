"""What a batch file, the Batch window and the server run on: a SlotBackend.

Two engines keep many requests in flight: BatchEngine decodes them together
in this process's slots; app.remote's RemoteBatchEngine keeps N requests
open on a server, whose own batching does the rest. BatchJob, the Batch
window and the benchmarks meet only this Protocol, so a batch journals,
resumes, pauses and reports the same way on either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from app.slots.types import BatchEvent, SlotRequest, SlotResult


class SlotBackend(Protocol):
    on_event: Callable[[BatchEvent], None] | None  # progress, starts and results, on run()'s thread
    notice: str | None  # a one-line caveat for the user (no chat template), or None

    def submit_many(self, reqs: Iterable[SlotRequest]) -> None:
        """Queue batch work; safe from any thread."""
        ...

    def run(self) -> list[SlotResult]:
        """Decode until the queue is empty, on the calling thread; the results in finishing order."""
        ...

    def cancel(self) -> None:
        """End run() soon; running requests end "cancelled". Safe from any thread."""
        ...

    def cancel_request(self, custom_id: str) -> None: ...

    def pause(self) -> None:
        """No new batch request starts (online ones still run)."""
        ...

    def resume(self) -> None: ...

    def free(self) -> None:
        """Release what the engine holds, on run()'s thread, once run() has returned."""
        ...
