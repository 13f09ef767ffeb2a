"""A llama context of its own on loaded weights, for work the chat's context is the wrong shape
for (pooled embeddings; a row of logits at every position), made and used by one thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import llama_cpp

from app.engine import batch_fill
from app.engine.errors import EngineError
from app.engine.loader import LoadedModel


class OwnContext:
    def __init__(self, model: LoadedModel, n_ctx: int, what: str, shape: Callable[[object], None]):
        """`shape` sets what this kind of context needs on llama.cpp's context params."""
        p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
        p.n_ctx = n_ctx
        p.n_seq_max = 1
        p.no_perf = True
        shape(p)
        self.model = model
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise EngineError(f"could not create {what} context of {n_ctx} tokens (memory?)")
        self.n_ctx = llama_cpp.llama_n_ctx(self.ctx)
        self.n_batch = int(p.n_batch)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)

    def decode(self, tokens: Sequence[int], start: int, doing: str) -> None:
        """Evaluate `tokens` at positions from `start`, every one with its output."""
        batch_fill.fill(self._batch, tokens, start, every_row=True)
        rc = llama_cpp.llama_decode(self.ctx, self._batch)
        if rc != 0:
            raise EngineError(f"llama_decode failed {doing} (code {rc})")

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
