"""Embeddings of texts or token lists, on a context of their own beside the chat's.

An embedding needs a context built for it (embeddings on, mean pooling, a
batch as long as the input: pooling sees one whole sequence at once), and
using the chat's or the server's context for it would throw away their KV
caches. So this is a second context on the same loaded weights, like the
batch engine's, made and used by one thread. Mean pooling and L2
normalisation by default, as llama-server's `--embeddings --pooling mean`.
"""

from __future__ import annotations

import llama_cpp
import numpy as np

from app.engine.errors import ContextOverflowError, EngineError
from app.engine.loader import LoadedModel
from app.engine.own_context import OwnContext

DEFAULT_CTX = 2048


def _for_embeddings(p) -> None:
    p.n_batch = p.n_ubatch = p.n_ctx  # mean pooling sees the whole input in one ubatch
    p.embeddings = True
    p.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_MEAN


class Embedder(OwnContext):
    def __init__(self, model: LoadedModel, n_ctx: int = DEFAULT_CTX):
        super().__init__(model, n_ctx, "an embeddings", _for_embeddings)
        self.dim = llama_cpp.llama_model_n_embd(model.llm.model)

    def tokenize(self, text: str) -> list[int]:
        return self.model.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def embed(self, tokens: list[int], normalize: bool = True) -> np.ndarray:
        """The pooled embedding of one input (float32, `dim` values)."""
        if not tokens:
            raise EngineError("an empty input has no embedding")
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(f"the input is {len(tokens)} tokens; embeddings take at most "
                                       f"{self.n_ctx}")
        self.clear()
        self.decode(tokens, 0, "computing an embedding")
        ptr = llama_cpp.llama_get_embeddings_seq(self.ctx, 0)
        if not ptr:
            raise EngineError("llama.cpp returned no pooled embedding")
        vec = np.ctypeslib.as_array(ptr, shape=(self.dim,)).astype(np.float32)
        if normalize:
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                vec /= norm
        return vec
