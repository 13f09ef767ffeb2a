"""A second llama.cpp context on the already loaded weights, with one KV stream per slot.

The chat Decoder's context holds one sequence. Batching needs `n_seq_max`
sequences, so we create another context on the same `llama_model` (weights
are shared, only the KV cache and compute buffers are new) instead of loading
the file twice. `kv_unified=False` gives each slot its own KV stream: the
sequences share no prefix, and llama.cpp then attends per stream instead of
masking one big shared cache (the header's advice for n_seq_max > 1).
"""

from __future__ import annotations

import llama_cpp

from app.engine.errors import EngineError
from app.engine.loader import LoadedModel

MAX_SEQ = 256  # LLAMA_MAX_SEQ: sequences one llama.cpp context can hold
MIN_SLOT_CTX = 64
MAX_TOTAL_CTX = 2**31 - 1  # n_ctx is a C uint32 (ctypes wraps a larger one) and positions int32


class BatchContextError(EngineError):
    """llama.cpp could not create the multi-sequence context (usually memory)."""


class BatchContext:
    def __init__(self, model: LoadedModel, n_slots: int, slot_ctx: int):
        # n_slots counts every sequence, the engine's reserved online one included,
        # so these messages speak of sequences: the user's --parallel is checked
        # (and named) before the model loads, by the front end.
        if not 1 <= n_slots <= MAX_SEQ:
            raise ValueError(f"a batch context holds 1 to {MAX_SEQ} sequences, got {n_slots}")
        if slot_ctx < MIN_SLOT_CTX:
            raise ValueError(f"slot context must be at least {MIN_SLOT_CTX} tokens, got {slot_ctx}")
        if n_slots * slot_ctx > MAX_TOTAL_CTX:
            raise ValueError(f"{n_slots} sequences of {slot_ctx} tokens need {n_slots * slot_ctx} "
                             f"tokens of context; one context holds at most {MAX_TOTAL_CTX}")
        src = model.llm.context_params
        # Copy threads, rope, flash-attn ... from the chat context's parameters.
        p = llama_cpp.llama_context_params.from_buffer_copy(src)
        p.n_seq_max = n_slots
        p.n_ctx = n_slots * slot_ctx
        # One decode step carries a token per slot plus prefill chunks.
        p.n_batch = max(int(src.n_batch), n_slots)
        p.n_ubatch = p.n_batch
        # Each step asks logits of at most one token per slot; the default (n_batch
        # outputs) reserves n_batch x n_vocab floats, ~0.5 GB with Gemma's 262k vocab.
        p.n_outputs_max = n_slots
        p.kv_unified = False
        p.swa_full = True  # the header warns a small SWA cache is slow with n_seq_max > 1
        p.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise BatchContextError(
                f"could not create a batch context with {n_slots} slots of {slot_ctx} tokens; "
                "try fewer --parallel slots or a smaller --ctx")
        self.n_slots = n_slots
        self.n_batch = int(p.n_batch)
        self.slot_ctx = llama_cpp.llama_n_ctx_seq(self.ctx)  # llama.cpp pads to 256
        self.mem = llama_cpp.llama_get_memory(self.ctx)

    def clear_seq(self, seq: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None

