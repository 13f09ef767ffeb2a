"""A batch file run end to end: read, skip what is done, decode the rest, journal each result.

Shared by `llamadesk batch` and the window's Batch panel, so resume and error
records behave the same in both, on either SlotBackend (local slots or a server).
Runs on the engine's thread (SlotBackend.run); the panel's pause and cancel go
straight to the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.batch_jsonl.requests import BatchInputError, InputItem, read_input
from app.batch_jsonl.results import ResultWriter, read_journal
from app.engine.sampling import GenerationSettings
from app.slots.backend import SlotBackend
from app.slots.types import BatchEvent, RequestDone, SlotResult


@dataclass
class JobSummary:
    total_lines: int = 0
    skipped: int = 0  # already in the output from an earlier run
    ok: int = 0
    errors: int = 0
    cancelled: int = 0  # were decoding when cancelled; run again to finish them
    not_started: int = 0
    generated: int = 0
    wall_s: float = 0.0
    results: list[SlotResult] = field(default_factory=list)

    @property
    def tok_s(self) -> float | None:
        return self.generated / self.wall_s if self.wall_s > 0 and self.generated else None


class BatchJob:
    def __init__(self, input_path: str | Path, output_path: str | Path, defaults: GenerationSettings):
        self.items: list[InputItem] = read_input(input_path, defaults)  # BatchInputError: exit 2
        self.output_path = Path(output_path)
        if self.output_path.exists() and self.output_path.samefile(input_path):
            raise BatchInputError(f"{output_path}: the output file is the input file; "
                                  "results would be appended to the requests")
        journal = read_journal(self.output_path)
        self.todo = [it for it in self.items if not journal.has(it)]
        self.skipped = len(self.items) - len(self.todo)

    def run(self, engine: SlotBackend, model_name: str,
            on_event: Callable[[BatchEvent], None] | None = None) -> JobSummary:
        summary = JobSummary(total_lines=len(self.items), skipped=self.skipped)
        writer = ResultWriter(self.output_path, model_name)
        outer = on_event

        def sink(ev: BatchEvent) -> None:
            # Online (chat) requests served during the batch are not batch results.
            if (isinstance(ev, RequestDone) and ev.result.stats.stop_reason != "cancelled"
                    and not ev.result.stats.online):
                writer.write(ev.result)  # journal first: a kill right after loses nothing
            if outer is not None:
                outer(ev)

        engine.on_event = sink
        t0 = time.perf_counter()
        try:
            for it in self.todo:
                if it.error is not None:
                    writer.write_error(it)
                    summary.errors += 1
            engine.submit_many(it.request for it in self.todo if it.request is not None)
            results = engine.run()
        finally:
            engine.on_event = outer
            writer.close()
        summary.wall_s = time.perf_counter() - t0
        results = [r for r in results if not r.stats.online]
        summary.results = results
        for r in results:
            if r.stats.stop_reason == "cancelled":
                summary.cancelled += 1
            elif r.stats.error is not None:
                summary.errors += 1
            else:
                summary.ok += 1
            summary.generated += r.stats.completion_tokens or 0
        queued = sum(1 for it in self.todo if it.request is not None)
        summary.not_started = queued - len(results)
        return summary
