"""The server's side of app.openai_compat's request checks: a refusal becomes an HTTP error.

The checks themselves live below the server, so batch files and Batch API
lines go through exactly the same ones (app.batch_jsonl.requests).
"""

from __future__ import annotations

from app.engine.sampling import GenerationSettings
from app.openai_compat.params import Parsed
from app.openai_compat.params import parse as parse_body
from app.openai_compat.refusal import RequestError
from app.serve.http_rules import ApiError


def parse(body, kind: str, defaults: GenerationSettings) -> Parsed:
    """`kind` "chat" or "completion"; raises ApiError (OpenAI's shape, the status to send)."""
    try:
        return parse_body(body, kind, defaults)
    except RequestError as e:
        raise ApiError(e.status, e.message, e.param, e.code, e.kind) from None
