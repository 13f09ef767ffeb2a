"""The one line the server's log keeps for each request it answered (a refusal's is
app.serve.http.refused): what an operator greps for when a client says it was slow or wrong."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.batch.types import SlotStats

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
