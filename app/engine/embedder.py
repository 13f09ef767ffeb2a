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

DEFAULT_CTX = 2048


class Embedder:
    def __init__(self, model: LoadedModel, n_ctx: int = DEFAULT_CTX):
        p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
        p.n_ctx = n_ctx
        p.n_batch = p.n_ubatch = n_ctx  # mean pooling sees the whole input in one ubatch
        p.n_seq_max = 1
        p.embeddings = True
        p.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_MEAN
        p.no_perf = True
        self.model = model
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise EngineError(f"could not create an embeddings context of {n_ctx} tokens (memory?)")
        self.n_ctx = llama_cpp.llama_n_ctx(self.ctx)
        self.dim = llama_cpp.llama_model_n_embd(model.llm.model)
        self._batch = llama_cpp.llama_batch_init(self.n_ctx, 0, 1)

    def tokenize(self, text: str) -> list[int]:
        return self.model.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    def embed(self, tokens: list[int], normalize: bool = True) -> np.ndarray:
        """The pooled embedding of one input (float32, `dim` values)."""
        if not tokens:
            raise EngineError("an empty input has no embedding")
        if len(tokens) > self.n_ctx:
            raise ContextOverflowError(f"the input is {len(tokens)} tokens; embeddings take at most "
                                       f"{self.n_ctx}")
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        b = self._batch
        for i, tok in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, i, 1, 1
            b.seq_id[i][0] = 0
        b.n_tokens = len(tokens)
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            raise EngineError(f"llama_decode failed computing an embedding (code {rc})")
        ptr = llama_cpp.llama_get_embeddings_seq(self.ctx, 0)
        if not ptr:
            raise EngineError("llama.cpp returned no pooled embedding")
        vec = np.ctypeslib.as_array(ptr, shape=(self.dim,)).astype(np.float32)
        if normalize:
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                vec /= norm
        return vec

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
