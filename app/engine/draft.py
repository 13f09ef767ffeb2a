"""A draft model: a smaller GGUF of the same vocabulary guesses the target's next tokens.

The draft decodes greedily, so each guess is a point mass and the decoder's
keep-if-the-target-samples-it rule (app.engine.speculative) stays exact. Its
own context mirrors the reply: before each guess it drops what the target
rejected (llama_memory_seq_rm) and evaluates what the target kept. Catching
up after the target's prefill is the draft's prefill, a cost paid once a
reply, so it is kept out of the Pacer's check times (which judge the steady
state) and reported apart.
"""

from __future__ import annotations

import time

import llama_cpp
import numpy as np

from app.engine import batch_fill
from app.engine.control import common_prefix
from app.engine.errors import EngineError
from app.engine.loader import LoadedModel

SAMPLE_EVERY = 97  # token texts compared between the vocabularies: every 97th, and the first 512


def vocab_mismatch(target: LoadedModel, draft: LoadedModel) -> str | None:
    """Why `draft` cannot guess for `target` (None: it can): a draft's token ids must mean the
    target's tokens, or every guess is a different word."""
    tv, dv = (llama_cpp.llama_model_get_vocab(m.llm.model) for m in (target, draft))
    nt, nd = llama_cpp.llama_vocab_n_tokens(tv), llama_cpp.llama_vocab_n_tokens(dv)
    if nt != nd:
        return f"its vocabulary has {nd} tokens, the model's {nt}"
    for name, fn in (("beginning", llama_cpp.llama_vocab_bos), ("end", llama_cpp.llama_vocab_eos)):
        if fn(tv) != fn(dv):
            return f"its {name}-of-text token is {fn(dv)}, the model's {fn(tv)}"
    for tok in (*range(min(512, nt)), *range(512, nt, SAMPLE_EVERY)):
        if llama_cpp.llama_vocab_get_text(tv, tok) != llama_cpp.llama_vocab_get_text(dv, tok):
            return f"token {tok} is {llama_cpp.llama_vocab_get_text(dv, tok)!r} in it, " \
                   f"{llama_cpp.llama_vocab_get_text(tv, tok)!r} in the model"
    return None


def draft_for(target: LoadedModel, draft: LoadedModel) -> DraftModel:
    """`draft` ready to guess for `target`; refused with a ValueError saying why (and closed)
    when its vocabulary is not the target's. The chat decoder and the server take drafts so."""
    why = vocab_mismatch(target, draft)
    if why is not None:
        draft.close()
        raise ValueError(f"{draft.header.path.name} cannot draft for this model: {why}")
    return DraftModel(draft)


class DraftModel:
    """The draft's weights and context, kept across replies like the target's."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self.ctx = model.llm.ctx
        self.n_batch = model.options.n_batch
        self.n_vocab = model.llm.n_vocab()
        self.tokens: list[int] = []  # exactly what its KV cache holds
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def _eval(self, toks, pos0: int) -> None:
        batch_fill.fill(self._batch, toks, pos0)
        rc = llama_cpp.llama_decode(self.ctx, self._batch)
        if rc != 0:
            raise EngineError(f"the draft model's llama_decode failed (code {rc})")

    def sync(self, hist: list[int]) -> None:
        """Its cache made to hold exactly `hist`: what the target rejected dropped, the rest read."""
        keep = common_prefix(self.tokens, hist)
        if keep == len(hist) and keep:
            keep -= 1  # the last token is evaluated again: its logits are the next guess's
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.ctx), 0, keep, -1)
        del self.tokens[keep:]
        for a in range(keep, len(hist), self.n_batch):
            chunk = hist[a:a + self.n_batch]
            self._eval(chunk, a)
            self.tokens.extend(chunk)

    def guess(self, k: int) -> list[int]:
        """k greedy tokens after what it holds (sync first); each but the last is fed back."""
        out: list[int] = []
        for i in range(k):
            row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, -1), shape=(self.n_vocab,))
            tok = int(row.argmax())
            out.append(tok)
            if i + 1 < k:
                self._eval((tok,), len(self.tokens))
                self.tokens.append(tok)
        return out

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.model.close()


class DraftDrafter:
    """One reply's guesser on a DraftModel: the reply's tokens so far, the draft kept in step."""

    mode = "draft"

    def __init__(self, draft: DraftModel, history: list[int]):
        self.draft = draft
        self.hist = list(history)
        self.catch_up_s = 0.0  # reading the prompt (and any rejected tail) into the draft

    def extend(self, tokens) -> None:
        self.hist.extend(tokens)

    def propose(self, k: int) -> list[int]:
        t0 = time.perf_counter()
        behind = len(self.hist) - common_prefix(self.draft.tokens, self.hist)
        self.draft.sync(self.hist)
        if behind > 8:  # a prompt, not the step's own tail: not the steady state the Pacer judges
            self.catch_up_s += time.perf_counter() - t0
        return self.draft.guess(k)
