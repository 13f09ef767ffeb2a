"""Log-probabilities of tokens from a logits row: what a client asking for `logprobs` reads.

Computed only when a request asks (a softmax over Gemma's 262k logits costs
a fraction of a millisecond, which a reply nobody asked it of must not pay),
from the model's own logits before any sampler or grammar has touched them,
as OpenAI and llama-server report them. Ids only here: the server turns them
into token text.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import llama_cpp
import numpy as np

MAX_TOP = 20  # OpenAI's own bound on top_logprobs


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()  # the k likeliest tokens at this position, likeliest first


def log_normalizer(row: np.ndarray) -> float:
    """log(sum(exp(row))), stably, in float64."""
    m = float(row.max())
    return m + float(np.log(np.exp(row.astype(np.float64) - m).sum()))


def top_of(row: np.ndarray, lse: float, k: int) -> tuple[tuple[int, float], ...]:
    if k <= 0:
        return ()
    k = min(k, row.shape[0])
    idx = np.argpartition(row, -k)[-k:]
    idx = idx[np.argsort(-row[idx], kind="stable")]
    return tuple((int(i), float(row[i]) - lse) for i in idx)


def at(row: np.ndarray, token: int, k: int) -> TokenLogprob:
    lse = log_normalizer(row)
    return TokenLogprob(token, float(row[token]) - lse, top_of(row, lse, k))


class Pieces:
    """Token ids to the bytes each stands for, as a client reading logprobs sees a token: its own
    piece, never merged with its neighbours (a multi-byte character may span two tokens)."""

    def __init__(self, llm):
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._memo: dict[int, bytes] = {}

    def __call__(self, tok: int) -> bytes:
        got = self._memo.get(tok)
        if got is None:
            buf = ctypes.create_string_buffer(256)
            n = llama_cpp.llama_token_to_piece(self._vocab, tok, buf, 256, 0, False)
            got = self._memo[tok] = buf.raw[:max(n, 0)]
        return got
