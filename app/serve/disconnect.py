"""A non-streaming client that leaves stops its reply, as a streaming one does.

A streaming reply notices a gone client at its next write; a whole reply
writes nothing until it is done, so without a watch its slot would decode to
max_tokens for nobody. Once the body has been read, the ASGI `receive`
channel has nothing more to say but `http.disconnect`: waiting on it beside
the work is the watch, with no polling.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection before its reply was ready."""


async def while_connected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result; ClientGone, with `work` cancelled (its `finally` cancels the engine's
    requests), when the client leaves first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the handler itself cancelled (the server shutting down)
        task.cancel()
        raise
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise ClientGone
    return task.result()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
