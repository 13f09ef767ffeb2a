"""Run every target on every prompt, one target at a time, and keep each reply's record.

Local targets are loaded one after another and each alone, so two models never
compete for memory bandwidth, the very thing decode speed measures. Every
run starts from an empty KV cache (a repetition that reused the last run's
prompt would measure the cache, not the model); a remote server keeps its own
cache, which its `cached_tokens` shows. A target that fails (a file that will
not load, a server that is down, a prompt too long for its context) says why
in its row, and the others still run.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.chat.engines import open_engine
from app.compare.targets import Target
from app.engine.control import CancelToken
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.errors import LlamaDeskError
from app.remote.errors import explain

METRICS = ("ttft_s", "prefill_tok_s", "decode_tok_s", "total_s", "decode_tokens", "peak_rss_bytes")
LOWER_IS_BETTER = {"ttft_s", "total_s", "peak_rss_bytes"}


@dataclass
class Row:
    target: Target
    runs: list[ReplyStats] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # the first repetition's reply to each prompt
    peak_rss_bytes: int | None = None
    error: str | None = None

    def values(self, metric: str) -> list[float]:
        if metric == "peak_rss_bytes":
            return [self.peak_rss_bytes] if self.peak_rss_bytes else []
        return [getattr(s, metric) for s in self.runs if getattr(s, metric) is not None]

    def median(self, metric: str) -> float | None:
        v = self.values(metric)
        return statistics.median(v) if v else None

    def spread(self, metric: str) -> tuple[float, float] | None:
        v = self.values(metric)
        return (min(v), max(v)) if v else None

    def predicted_total(self) -> float | None:
        """total ~= TTFT + tokens / rate, per run, then the median."""
        pred = [s.ttft_s + (s.decode_count() or 0) / s.decode_tok_s for s in self.runs
                if s.ttft_s is not None and s.decode_tok_s and s.decode_tokens]
        return statistics.median(pred) if pred else None


@dataclass
class Comparison:
    rows: list[Row]
    prompts: list[str]
    repeat: int
    settings: GenerationSettings
    started_at: float = field(default_factory=time.time)
    cancelled: bool = False

    def best(self, metric: str) -> tuple[Row | None, bool]:
        """The row with the best median, and whether it is clear: its spread does not
        overlap the runner-up's (else 'no clear winner')."""
        rows = [r for r in self.rows if r.median(metric) is not None]
        if len(rows) < 2:
            return (rows[0] if rows else None), False
        low = metric in LOWER_IS_BETTER
        rows.sort(key=lambda r: r.median(metric), reverse=not low)
        a, b = rows[0].spread(metric), rows[1].spread(metric)
        clear = a[1] < b[0] if low else a[0] > b[1]
        return rows[0], clear


class _PeakRss:
    """What a local target adds to the process's resident memory at its peak, sampled at 10 Hz
    (psutil): the model's pages, its KV cache and buffers, without what ran before it."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.base = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name="llamadesk-compare-rss", daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return max(self.peak, self.proc.memory_info().rss) - self.base


def run_comparison(targets: list[Target], prompts: list[str], settings: GenerationSettings, repeat: int = 3,
                   warmup: bool = True, on_progress: Callable[[str, int, int], None] | None = None,
                   cancel: CancelToken | None = None, options: Mapping[str, str] | None = None) -> Comparison:
    """`options`: how the front end names an endpoint's options (app.remote.errors.explain), so a
    row that failed for want of a key or a model says what to type there."""
    cmp = Comparison([Row(t) for t in targets], prompts, repeat, settings)
    total = len(targets) * len(prompts) * repeat
    done = 0
    for row in cmp.rows:
        if cancel is not None and cancel.is_set():
            row.error = "cancelled before it ran"
            continue
        rss = _PeakRss() if row.target.kind == "model" else None
        try:
            s = row.target.settings(settings)
            eng = open_engine(row.target.engine_target())
        except (LlamaDeskError, ValueError, OSError) as e:
            row.error = explain(e, options)
            if rss:
                rss.stop()
            done += len(prompts) * repeat
            continue
        try:
            if warmup:
                eng.reset()
                warm = GenerationSettings(**{**s.__dict__, "max_tokens": 4})
                eng.reply([], prompts[0], warm, cancel=cancel)
            for p in prompts:
                for k in range(repeat):
                    if cancel is not None and cancel.is_set():
                        raise _Cancelled
                    eng.reset()
                    r = eng.reply([], p, s, cancel=cancel)
                    if r.stats.error is not None:
                        raise LlamaDeskError(r.stats.error)
                    if r.stats.stop_reason == "cancelled":
                        raise _Cancelled
                    row.runs.append(r.stats)
                    if k == 0:
                        row.texts.append(r.text)
                    done += 1
                    if on_progress:
                        on_progress(row.target.label, done, total)
        except _Cancelled:
            row.error = "cancelled"
            cmp.cancelled = True
        except (LlamaDeskError, ValueError) as e:
            row.error = explain(e, options)
        finally:
            eng.close()
            if rss:
                row.peak_rss_bytes = rss.stop()
    return cmp


class _Cancelled(Exception):
    pass
