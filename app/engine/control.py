"""What a caller hands a running reply, and the one token comparison every cache shares.

Most code that starts a reply (the CLI, the window's threads, the batch and
the server) needs only how to stop it, where its events go, and how many
leading tokens two prompts share; none of that needs llama.cpp. Kept apart
from the decode loop so those callers import this small module and not the
loop's whole machinery.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from app.engine.events import Event

EventSink = Callable[[Event], None]


class CancelToken:
    """Set from any thread; the loop checks it per token and inside prefill."""

    def __init__(self) -> None:
        self._ev = threading.Event()

    def cancel(self) -> None:
        self._ev.set()

    def is_set(self) -> bool:
        return self._ev.is_set()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share: what a KV cache holding `a` can keep for `b`."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
