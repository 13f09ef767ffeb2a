"""A second llama.cpp context on the already loaded weights, one KV sequence per slot.

The chat Decoder's context holds one sequence. Batching needs `n_seq_max`
sequences, so we create another context on the same `llama_model` (weights
are shared, only the KV cache and compute buffers are new) instead of loading
the file twice.

Two layouts of that cache, chosen by `unified`:

- per-slot streams (`kv_unified=False`): each sequence has a KV buffer of its
  own and attends only over it. But llama.cpp splits a batch over streams
  into one ubatch per run of consecutive sequence ids (`split_equal`, sequential),
  and every ubatch reads the weights again: slots busy in 0, 2, 4 and 6 cost
  four weight reads a step, not one. A prefix copied to another sequence moves
  the whole stream buffer (llama.cpp copies streams only whole).
- unified (`kv_unified=True`): one buffer for every sequence, each step one
  ubatch whatever sequences it carries, and a prefix shared by several
  sequences is one set of cells tagged with each of them (`seq_cp` edits only
  the cells' metadata). Every token attends over all the cells in use,
  masked, so attention grows with what all the sequences hold together.

`bench --serve` and `bench --batch` measure both; app.slots.engine says
which one the server and the batch runs take.
"""

from __future__ import annotations

import llama_cpp

from app.engine.errors import EngineError
from app.engine.loader import LoadedModel

MAX_SEQ = 256  # LLAMA_MAX_SEQ: sequences one llama.cpp context can hold
MIN_SLOT_CTX = 64
MAX_TOTAL_CTX = 2**31 - 1  # n_ctx is a C uint32 (ctypes wraps a larger one) and positions int32
CTX_PAD = 256  # llama.cpp rounds a stream's context up to this; a unified slot is rounded the same way


class BatchContextError(EngineError):
    """llama.cpp could not create the multi-sequence context (usually memory)."""


class BatchContext:
    def __init__(self, model: LoadedModel, n_slots: int, slot_ctx: int, unified: bool = False,
                 outputs: int = 0):
        """`outputs`: the logits rows one step may ask for, when that is more than one a sequence
        (a speculative check asks for one a guess, app.slots.speculation): llama.cpp asserts,
        fatally, on a step asking for more than its context was made for."""
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
        padded = min(-(-slot_ctx // CTX_PAD) * CTX_PAD, MAX_TOTAL_CTX // n_slots)
        src = model.llm.context_params
        # Copy threads, rope, flash-attn ... from the chat context's parameters.
        p = llama_cpp.llama_context_params.from_buffer_copy(src)
        p.n_seq_max = n_slots
        # A unified cache holds every sequence at its longest, so no sequence runs out of
        # cells whatever the others hold (cells shared by several count once).
        p.n_ctx = n_slots * padded
        # One decode step carries a token per slot plus prefill chunks.
        p.n_batch = max(int(src.n_batch), n_slots)
        p.n_ubatch = p.n_batch
        # Each step asks logits of at most one token per slot; the default (n_batch
        # outputs) reserves n_batch x n_vocab floats, ~0.5 GB with Gemma's 262k vocab.
        p.n_outputs_max = max(n_slots, outputs)
        p.kv_unified = unified
        p.swa_full = True  # the header warns a small SWA cache is slow with n_seq_max > 1
        p.no_perf = True
        self.params = p
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise BatchContextError(
                f"could not create a batch context with {n_slots} slots of {slot_ctx} tokens; "
                "try fewer --parallel slots or a smaller --ctx")
        self.n_slots = n_slots
        self.unified = unified
        self.n_batch = int(p.n_batch)
        # A stream's own length; a unified cache's sequence may grow to all of n_ctx, so the
        # engine holds each to the padded slot length itself.
        self.slot_ctx = padded if unified else llama_cpp.llama_n_ctx_seq(self.ctx)
        self.mem = llama_cpp.llama_get_memory(self.ctx)

    def clear_seq(self, seq: int) -> None:
        llama_cpp.llama_memory_seq_rm(self.mem, seq, -1, -1)

    def cut(self, seq: int, n: int) -> bool:
        """Keep `seq`'s first `n` positions; True when it then holds exactly those."""
        return bool(llama_cpp.llama_memory_seq_rm(self.mem, seq, n, -1)) and self.holds(seq) == n

    def holds(self, seq: int) -> int:
        """How many positions `seq` holds (its last position + 1; 0 when empty)."""
        return llama_cpp.llama_memory_seq_pos_max(self.mem, seq) + 1

    def copy_prefix(self, src: int, dst: int, n: int) -> bool:
        """Make `dst` hold exactly `src`'s first `n` tokens, whatever it held; False leaves it empty.

        Unified: the cells gain `dst`'s tag, nothing is copied. Per-slot streams: llama.cpp
        copies only whole streams (a partial copy is a GGML_ASSERT, fatal), and it does so at
        the start of the next llama_decode, before that step writes anything; `dst` is then
        cut back to `n`. Either way `src` may go on decoding or be cut in the meantime: the
        cells already carry `dst`'s tag, and a stream copy happens before the next write."""
        mem = self.mem
        if self.unified:
            llama_cpp.llama_memory_seq_rm(mem, dst, -1, -1)
            llama_cpp.llama_memory_seq_cp(mem, src, dst, 0, n)
        else:
            llama_cpp.llama_memory_seq_cp(mem, src, dst, -1, -1)
            llama_cpp.llama_memory_seq_rm(mem, dst, n, -1)
        if self.holds(dst) == n:
            return True
        self.clear_seq(dst)
        return False

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
