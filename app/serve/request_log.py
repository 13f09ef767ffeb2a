"""The one line the server's log keeps for each request it answered (a refusal's is
app.serve.http_rules.refused): what an operator greps for when a client says it was slow or wrong."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from app.slots.types import SlotStats

log = logging.getLogger("llamadesk.serve.requests")


def served(method: str, path: str, status: int, model: str, stats: Sequence[SlotStats],
           error: str | None = None) -> None:
    prompt = sum(s.prompt_tokens or 0 for s in stats)
    cached = sum(s.cached_tokens for s in stats)
    generated = sum(s.completion_tokens or 0 for s in stats)
    ttft = min((s.ttft_from_queue_s for s in stats if s.ttft_from_queue_s is not None), default=None)
    total = max((s.total_s for s in stats if s.total_s is not None), default=None)
    line = (f"{method} {path} {status} model={model} choices={len(stats)} prompt={prompt} cached={cached} "
            f"generated={generated} ttft_ms={_ms(ttft)} total_ms={_ms(total)}")
    if error:
        log.warning("%s error=%s", line, error.replace("\n", " ")[:300])
    else:
        log.info("%s", line)


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:.0f}"


def answered(method: str, path: str, status: int, model: str, seconds: float, **counts: int) -> None:
    """The line of a request that generates nothing (embeddings): what it read, how long it took."""
    said = "".join(f" {k}={v}" for k, v in counts.items())
    log.info("%s %s %s model=%s%s total_ms=%s", method, path, status, model, said, _ms(seconds))


class RequestLog:
    """A line for each request answered that no route logs itself: the models, files and batches
    routes, whose callers (an SDK listing models, a batch poller) are what an operator traces.
    Refusals are the error handlers' lines and generations log their own, with their tokens; a
    scraper's /health and /metrics are at debug level, or they would be most of the log.
    A plain ASGI middleware, like KeyCheck, so a stream passes through untouched."""

    def __init__(self, app, self_logged: frozenset[tuple[str, str]], quiet: frozenset[str]):
        self.app, self.self_logged, self.quiet = app, self_logged, quiet

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or (scope["method"], scope["path"]) in self.self_logged:
            await self.app(scope, receive, send)
            return
        t0, status = time.perf_counter(), 0

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body") and status < 400:
                level = logging.DEBUG if scope["path"] in self.quiet else logging.INFO
                log.log(level, "%s %s %s total_ms=%s", scope["method"], scope["path"], status,
                        _ms(time.perf_counter() - t0))
            await send(message)

        await self.app(scope, receive, send=sending)
