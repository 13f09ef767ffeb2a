"""The server's second thread on the model: embeddings and prompt scoring, off the decode loop.

/v1/embeddings and `echo` with logprobs each need a llama context of a kind
the continuous-batching engine's is not (pooled embeddings; a row of logits
for every prompt token), and running them on the engine's thread would stall
every stream for as long as they take. So one more thread owns those two
contexts (made on first use, on the shared weights; the thread rule of
app.engine) and runs their jobs one at a time; the event loop awaits each.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from app.engine.embedder import Embedder
from app.engine.loader import LoadedModel
from app.engine.logprobs import TokenLogprob
from app.engine.scorer import Scorer
from app.openai_compat.embeddings import EmbedRequest, ModelFacts, check_lengths

T = TypeVar("T")


class SideEngine:
    def __init__(self, model: LoadedModel, n_ctx: int):
        self.model, self.n_ctx = model, n_ctx
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamadesk-serve-side")
        self._embedder: Embedder | None = None
        self._scorer: Scorer | None = None
        self._closed = threading.Event()

    async def run(self, job: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self._pool.submit(job))

    def call(self, job: Callable[[], T]) -> T:
        """`run` for a thread that may block (a batch's): online jobs queue between its jobs."""
        return self._pool.submit(job).result()

    @property
    def facts(self) -> ModelFacts:
        return ModelFacts(int(self.model.llm.n_vocab()), self.embedding_dim, self.n_ctx)

    # -- the side thread ------------------------------------------------------
    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        return self.model.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)

    def embed(self, inputs: list[list[int]], normalize: bool = True) -> list[np.ndarray]:
        if self._embedder is None:
            self._embedder = Embedder(self.model, self.n_ctx)
        return [self._embedder.embed(toks, normalize) for toks in inputs]

    def embed_request(self, req: EmbedRequest) -> tuple[list[np.ndarray], int]:
        """A checked request's vectors and the tokens they read (RequestError: an input too long)."""
        toks = [self.tokenize(x) if isinstance(x, str) else list(x) for x in req.inputs]
        check_lengths(toks, self.n_ctx)
        return self.embed(toks), sum(len(t) for t in toks)

    @property
    def embedding_dim(self) -> int:
        return int(self.model.llm.n_embd())

    def score(self, tokens: list[int], top: int) -> list[TokenLogprob | None]:
        if self._scorer is None:
            self._scorer = Scorer(self.model, self.n_ctx)
        return self._scorer.score(tokens, top)

    def close(self) -> None:
        """Free the contexts on their own thread, then end it (before the model is freed)."""
        if self._closed.is_set():
            return
        self._closed.set()

        def free() -> None:
            for ctx in (self._embedder, self._scorer):
                if ctx is not None:
                    ctx.close()
            self._embedder = self._scorer = None
        self._pool.submit(free).result()
        self._pool.shutdown(wait=True)
