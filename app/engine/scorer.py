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
from app.engine.errors import ContextOverflowError, EngineError
from app.engine.loader import LoadedModel
from app.engine.logprobs import TokenLogprob

DEFAULT_CTX = 2048


class Scorer:
    def __init__(self, model: LoadedModel, n_ctx: int = DEFAULT_CTX):
        p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
        p.n_ctx = n_ctx
        p.n_seq_max = 1
        p.n_outputs_max = p.n_batch  # a row of logits for every token of a chunk
        p.no_perf = True
        self.model = model
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise EngineError(f"could not create a scoring context of {n_ctx} tokens (memory?)")
        self.n_ctx = llama_cpp.llama_n_ctx(self.ctx)
        self.n_batch = int(p.n_batch)
        self.n_vocab = model.llm.n_vocab()
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def score(self, tokens: list[int], top: int = 0) -> list[TokenLogprob | None]:
        """Per token, its log-probability given the ones before it (None for the first, which
        nothing predicts), with the `top` likeliest tokens at that position."""
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(f"the text is {len(tokens)} tokens; scoring takes at most "
                                       f"{self.n_ctx}")
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        out: list[TokenLogprob | None] = [None]
        b = self._batch
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            for i, tok in enumerate(chunk):
                b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, start + i, 1, 1
                b.seq_id[i][0] = 0
            b.n_tokens = len(chunk)
            rc = llama_cpp.llama_decode(self.ctx, b)
            if rc != 0:
                raise EngineError(f"llama_decode failed while scoring (code {rc})")
            for i in range(len(chunk)):
                pos = start + i
                if pos + 1 >= len(tokens):
                    break
                logits = llama_cpp.llama_get_logits_ith(self.ctx, i)
                row = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
                out.append(logprobs.at(row, tokens[pos + 1], top))
        return out[: len(tokens)]

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
