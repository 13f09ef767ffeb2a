"""An embeddings request checked as OpenAI's /v1/embeddings defines it, and its answer's shape.

Below the server for the same reason as params.py: a Batch API line for
/v1/embeddings must be refused with exactly the words the online endpoint
would use, and answered in exactly its body. The checks that need the model
(vocabulary, vector size, context) take its facts, so a batch checks each
line against the model it runs on.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.openai_compat.fields import is_text
from app.openai_compat.refusal import RequestError, bad

URL = "/v1/embeddings"
FIELDS = ("input", "model", "encoding_format", "dimensions", "user")
MAX_INPUTS = 2048  # OpenAI's own bound on one request's inputs
BYTES_PER_TOKEN = 256  # no token's text is longer: a string past n_ctx times this cannot fit


@dataclass(frozen=True)
class ModelFacts:
    """What the checks need of the model: its vocabulary, its vector size, a context's length."""

    n_vocab: int
    dim: int
    n_ctx: int


@dataclass(frozen=True)
class EmbedRequest:
    inputs: list[str | list[int]]
    fmt: str  # "float" or "base64"


def parse_embedding(body, model_id: str, facts: ModelFacts) -> EmbedRequest:
    """RequestError (OpenAI's status, message and param) for anything the endpoint does not take."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object", None, "invalid_json")
    for k in body:
        if k not in FIELDS:
            raise RequestError(400, f"Unrecognized request argument supplied: {k}", k, "unknown_parameter")
    model = body.get("model")
    if model != model_id:
        raise RequestError(404, f"The model {model!r} does not exist (this server has {model_id!r})",
                           "model", "model_not_found")
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise bad("encoding_format", "encoding_format must be float or base64")
    if body.get("dimensions") not in (None, facts.dim):
        raise bad("dimensions", f"this model's embeddings have {facts.dim} dimensions; it was not "
                                "trained to give shorter ones")
    inputs = _inputs(body.get("input"), facts.n_vocab)
    too_long = next((i for i, x in enumerate(inputs) if isinstance(x, str)
                     and len(x.encode("utf-8")) > facts.n_ctx * BYTES_PER_TOKEN), None)
    if too_long is not None:
        raise bad("input", f"input[{too_long}] is longer than {facts.n_ctx} tokens can be")
    return EmbedRequest(inputs, fmt)


def _token_ids(x) -> bool:
    return isinstance(x, list) and bool(x) and all(isinstance(t, int) and not isinstance(t, bool) for t in x)


def _inputs(raw, n_vocab: int) -> list[str | list[int]]:
    if isinstance(raw, str):
        raw = [raw]
    if _token_ids(raw):
        raw = [raw]  # one input as token ids
    if not isinstance(raw, list) or not raw:
        raise bad("input", "input must be a string, a list of strings, or token ids")
    if len(raw) > MAX_INPUTS:
        raise bad("input", f"at most {MAX_INPUTS} inputs in one request, got {len(raw)}")
    for i, x in enumerate(raw):
        if isinstance(x, str):
            if not x.strip() or not is_text(x):
                raise bad("input", f"input[{i}] must be non-empty valid text")
        elif _token_ids(x):
            if not all(0 <= t < n_vocab for t in x):
                raise bad("input", f"input[{i}] holds a token id outside this model's {n_vocab}")
        else:
            raise bad("input", f"input[{i}] must be a string or a list of token ids")
    return raw


def check_lengths(tokens: Sequence[Sequence[int]], n_ctx: int) -> None:
    """After tokenizing: an input longer than a context is refused, not cut."""
    for i, t in enumerate(tokens):
        if len(t) > n_ctx:
            raise RequestError(400, f"input[{i}] is {len(t)} tokens; embeddings take at most {n_ctx}",
                               "input", "context_length_exceeded")


def embedding_body(vectors: Sequence[np.ndarray], fmt: str, model_id: str, used: int) -> dict:
    """OpenAI's answer: one embedding a input, in order, and the tokens read."""
    data = [{"object": "embedding", "index": i,
             "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if fmt == "base64"
             else v.tolist()} for i, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": model_id,
            "usage": {"prompt_tokens": used, "total_tokens": used}}
