"""The log-probability of every token of a text: what `echo` with `logprobs` returns, and what
an evaluator (lm-eval's loglikelihood tasks) asks a server for.

Decoding asks llama.cpp for one row of logits per step; scoring a prompt
needs a row for every position, which a context reserves room for in advance
(n_outputs_max). So this is a context of its own on the loaded weights, made
and used by one thread, beside the chat's and the server's.
"""

from __future__ import annotations

import llama_cpp
import numpy as np

from app.engine import logprobs
from app.engine.errors import ContextOverflowError
from app.engine.loader import LoadedModel
from app.engine.logprobs import TokenLogprob
from app.engine.own_context import OwnContext

DEFAULT_CTX = 2048


def _for_scoring(p) -> None:
    p.n_outputs_max = p.n_batch  # a row of logits for every token of a chunk


class Scorer(OwnContext):
    def __init__(self, model: LoadedModel, n_ctx: int = DEFAULT_CTX):
        super().__init__(model, n_ctx, "a scoring", _for_scoring)
        self.n_vocab = model.llm.n_vocab()

    def score(self, tokens: list[int], top: int = 0) -> list[TokenLogprob | None]:
        """Per token, its log-probability given the ones before it (None for the first, which
        nothing predicts), with the `top` likeliest tokens at that position."""
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(f"the text is {len(tokens)} tokens; scoring takes at most "
                                       f"{self.n_ctx}")
        self.clear()
        out: list[TokenLogprob | None] = [None]
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            self.decode(chunk, start, "while scoring")
            for i in range(len(chunk)):
                pos = start + i
                if pos + 1 >= len(tokens):
                    break
                logits = llama_cpp.llama_get_logits_ith(self.ctx, i)
                row = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
                out.append(logprobs.at(row, tokens[pos + 1], top))
        return out[: len(tokens)]
