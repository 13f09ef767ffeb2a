"""Stored timestamps: seconds since 1970, which ones are sane, and showing them.

A file can still hold a time no clock produced (a transcript imported before
imports were checked, a hand-edited database, a tool that wrote milliseconds),
and one such value must not stop the whole conversation list: everything that
shows a stored time goes through `local`/`utc`, which answer None (shown as
UNKNOWN) where the platform's time functions would raise.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

EARLIEST = 0.0
# A day short of year 10000, so the local time of any accepted value is still in
# datetime's range whatever the time zone.
LATEST = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
UNKNOWN = "?"


def in_range(ts) -> bool:
    return (isinstance(ts, (int, float)) and not isinstance(ts, bool)
            and EARLIEST <= ts <= LATEST)  # NaN compares false: out


def seconds(value) -> float | None:
    """`value` as seconds since 1970, or None when it is not a time we can keep.

    JavaScript tools write milliseconds; a number past year 9999 in seconds that
    is a sane time in milliseconds is taken as that (1978 onwards, so no real
    seconds value is ever misread).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:  # an integer too big for a float
        return None
    if not math.isfinite(v):
        return None
    if EARLIEST <= v <= LATEST:
        return v
    if LATEST < v <= LATEST * 1000:
        return v / 1000
    return None


def local(ts) -> datetime | None:
    """The local time of a stored timestamp, or None when it cannot be shown."""
    if not in_range(ts):
        return None
    try:
        return datetime.fromtimestamp(ts).astimezone()
    except (OverflowError, OSError, ValueError):  # platform limits (Windows: no negative times)
        return None


def utc(ts) -> datetime | None:
    if not in_range(ts):
        return None
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def shown(ts, pattern: str) -> str:
    """strftime of the local time, or UNKNOWN."""
    t = local(ts)
    return t.strftime(pattern) if t is not None else UNKNOWN
