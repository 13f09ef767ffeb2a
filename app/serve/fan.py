"""One request's slot requests (n choices, or one per prompt) as one stream of (index, event).

OpenAI's `n` and a completion's list of prompts ask for several answers in one
response. Each is a slot request of its own (its own seed, so its own text,
and the choices decode side by side); the engine copies a prompt's KV that
another slot holds or is still evaluating instead of prefilling it again, so
the n choices of one prompt share one prefill.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from app.slots.types import RequestDone


class EventPipe:
    """Engine-thread events to the event loop, one wake-up for however many arrived meanwhile:
    a wake-up per token costs the loop more than the token's own work."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.items: list = []
        self.lock = threading.Lock()
        self.ready = asyncio.Event()

    def put(self, ev) -> None:  # the engine thread
        with self.lock:
            self.items.append(ev)
            first = len(self.items) == 1
        if first:
            self.loop.call_soon_threadsafe(self.ready.set)

    async def get(self) -> list:
        await self.ready.wait()
        with self.lock:
            got, self.items = self.items, []
            self.ready.clear()
        return got


@dataclass
class Fan:
    """The slot requests of one HTTP request, choice i's events tagged i."""

    pipe: EventPipe
    rids: list[str] = field(default_factory=list)

    def sink(self, index: int) -> Callable[[object], None]:
        return lambda ev: self.pipe.put((index, ev))

    async def events(self, cancel: Callable[[str], None]) -> AsyncIterator[tuple[int, object]]:
        """Every choice's events until each has its RequestDone; a consumer that leaves early
        (a client gone, an error) cancels the choices still running."""
        left = set(range(len(self.rids)))
        try:
            while left:
                for index, ev in await self.pipe.get():
                    if isinstance(ev, RequestDone):
                        left.discard(index)  # before the yield: a consumer may stop at it
                    yield index, ev
        finally:
            for index in left:
                cancel(self.rids[index])
