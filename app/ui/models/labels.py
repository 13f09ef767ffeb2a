"""How a fit and a transfer read in the window: said the same in the search, the first-launch
panel and the download row, so "fits" means one thing wherever it shows.

A fit label alone ("tight") leaves the user guessing how tight; it always comes with the
numbers it was judged on: what the model needs and what is free. The transfer's rate is
taken over the last few seconds, not since the start, so a resumed download (whose first
report is every byte already on disk) and a connection that slows down both read true.
"""

from __future__ import annotations

import time
from collections import deque

from app.engine.gguf import human_size

# WCAG's 4.5:1 on the light list's white and grey rows and the panel's grey (the tight orange
# and the fits green used to fall short of it on light greys).
FIT_COLOURS = {"fits": "#1a7440", "tight": "#8f5b07", "won't fit": "#c0392b"}
FIT_COLOURS_DARK = {"fits": "#58d68d", "tight": "#f5b041", "won't fit": "#ff6b6b"}  # for contrast on grey
RATE_WINDOW_S = 3.0


def fit_colour(label: str, dark: bool = False) -> str | None:
    return (FIT_COLOURS_DARK if dark else FIT_COLOURS).get(label)


def fit_text(label: str, needs: int | None, free: int | None) -> str:
    """ "fits · needs 412.0 MB, 9.8 GB free"; "?" alone when nothing could be judged."""
    if needs is None:
        return label
    free_part = f", {human_size(free)} free" if free is not None else ""
    return f"{label} · needs {human_size(needs)}{free_part}"


def fit_tooltip(n_ctx: int) -> str:
    return (f"Memory the model would take at a {n_ctx:,}-token context (the weights, the KV cache, "
            "the vocabulary and one prompt step), against this machine's available memory now.\n"
            "fits: within 80% of it · tight: within all of it, other programs may be squeezed · "
            "won't fit: more than is free. The context length is in Settings.")


def duration(s: float) -> str:
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class RateMeter:
    """Bytes per second over the last RATE_WINDOW_S seconds of reports."""

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.samples: deque[tuple[float, int]] = deque()

    def reset(self) -> None:
        self.samples.clear()

    def add(self, done: int) -> float | None:
        now = self.clock()
        if self.samples and done < self.samples[-1][1]:
            self.samples.clear()  # a new phase, or a file fetched again from byte 0
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW_S:
            self.samples.popleft()
        return self.rate()

    def rate(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else None


def transfer_text(done: int, total: int, rate: float | None) -> str:
    """ "120.5 MB of 253.0 MB · 45.2 MB/s · 3 s left" (the rate and time once known)."""
    parts = [f"{human_size(done)} of {human_size(total)}"]
    if done >= total:
        return parts[0]
    if rate is None:
        parts.append("measuring the rate…")
    elif rate > 0:
        parts.append(f"{human_size(rate)}/s")
        parts.append(f"{duration((total - done) / rate)} left")
    else:
        parts.append(f"nothing arrived for {RATE_WINDOW_S:.0f} s: waiting for the server…")
    return " · ".join(parts)
