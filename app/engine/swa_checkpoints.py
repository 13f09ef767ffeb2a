"""Checkpoints of the sliding-window cache: how a branch switch keeps its prefix on Gemma 3.

A sliding-window (SWA) model's cache keeps, for its SWA layers, only the last
n_swa + n_ubatch positions (llama.cpp's swa_full off, which the loader keeps:
a full-size window makes every decode step after a long prefix slower). Its
full-attention layers keep every position, so going back to an earlier point
of the conversation only lacks the window before that point, and once that is
gone the Decoder had to evaluate the whole prompt again. llama-server answers
this with context checkpoints, and so does this module: at the points a later
branch can restart from, a copy of sequence 0's SWA cells
(`llama_state_seq_get_data_ext` with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the
window alone, a few MB, not the whole cache), with the tokens it is valid for.
Going back past the window, the Decoder cuts the full-attention cache to the
end of the newest checkpoint that is a prefix of the new prompt and puts the
window back from it, then evaluates only the rest.

A checkpoint is valid only while the full-attention cache below its end holds
the same tokens, so each keeps its token prefix: one whose tokens the cache no
longer holds is dropped (it can never serve again, since the cache only grows
from the point it was cut to), and one is restored only at its own end (what
llama.cpp saved is the window before that end, the n_swa positions the next
token needs, no more). The list is bounded in count and bytes; when it is
full, the checkpoint closest after its predecessor goes, so the survivors stay
spread over the conversation rather than all near its end.

Host memory only (ON_DEVICE keeps one state per sequence on the device, not a
list). Driven by the thread that owns the Decoder, like the Decoder itself.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import llama_cpp

log = logging.getLogger("llamadesk.engine")

PARTIAL = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
MAX_COUNT = 16
MAX_BYTES = 192 << 20


@dataclass(frozen=True)
class Checkpoint:
    tokens: tuple[int, ...]  # what positions 0 .. end-1 of seq 0 held when it was taken
    pos_min: int  # the window's first position: end - n_swa, or 0
    data: bytearray = field(repr=False)

    @property
    def end(self) -> int:
        return len(self.tokens)


@dataclass
class Costs:
    """What checkpoints cost, for the bench: bytes held, and the time to take and put back."""

    saved: int = 0
    saved_bytes: int = 0
    save_s: float = 0.0
    peak_count: int = 0
    peak_bytes: int = 0
    restored: int = 0
    restore_s: float = 0.0
    failed: int = 0
    evicted: int = 0


class SwaCheckpoints:
    """The checkpoints of one context's sequence 0, oldest first."""

    def __init__(self, ctx, n_swa: int, max_count: int = MAX_COUNT, max_bytes: int = MAX_BYTES):
        self.ctx = ctx
        self.n_swa = n_swa
        self.max_count = max(1, max_count)
        self.max_bytes = max_bytes
        self.items: list[Checkpoint] = []
        self.costs = Costs()

    def __len__(self) -> int:
        return len(self.items)

    @property
    def bytes(self) -> int:
        return sum(len(c.data) for c in self.items)

    def clear(self) -> None:
        self.items = []

    # -- taking ---------------------------------------------------------------
    def save(self, tokens: Sequence[int]) -> Checkpoint | None:
        """Take the window of seq 0, which must hold exactly `tokens`; None when llama.cpp gives
        nothing (logged) or when one for these tokens is kept already."""
        end = len(tokens)
        if end == 0 or any(c.end == end and list(c.tokens) == list(tokens) for c in self.items):
            return None
        t0 = time.perf_counter()
        mem = llama_cpp.llama_get_memory(self.ctx)
        size = llama_cpp.llama_state_seq_get_size_ext(self.ctx, 0, PARTIAL)
        if size == 0 or size > self.max_bytes:
            return None
        data = bytearray(size)
        got = llama_cpp.llama_state_seq_get_data_ext(self.ctx, (ctypes.c_uint8 * size).from_buffer(data),
                                                     size, 0, PARTIAL)
        if got != size:
            log.info("a sliding-window checkpoint at %d tokens could not be taken (%d of %d bytes)",
                     end, got, size)
            return None
        cp = Checkpoint(tuple(tokens), llama_cpp.llama_memory_seq_pos_min(mem, 0), data)
        self.items = [c for c in self.items if c.end != end]  # a newer state of the same point wins
        self.items.append(cp)
        self._bound()
        c = self.costs
        c.saved += 1
        c.saved_bytes += size
        c.save_s += time.perf_counter() - t0
        c.peak_count, c.peak_bytes = max(c.peak_count, len(self.items)), max(c.peak_bytes, self.bytes)
        return cp

    def _bound(self) -> None:
        """Within count and bytes: drop the checkpoint closest after its predecessor, never the newest."""
        while len(self.items) > 1 and (len(self.items) > self.max_count or self.bytes > self.max_bytes):
            newest = self.items[-1]
            ordered = sorted(self.items[:-1], key=lambda c: c.end)
            gaps = [(c.end - (ordered[i - 1].end if i else 0), i, c) for i, c in enumerate(ordered)]
            gone = min(gaps, key=lambda g: (g[0], g[1]))[2]
            self.items = [c for c in self.items if c is not gone]
            assert self.items[-1] is newest
            self.costs.evicted += 1

    # -- using ----------------------------------------------------------------
    def keep_held(self, held: Sequence[int]) -> None:
        """Drop the checkpoints whose tokens the cache no longer holds below their end."""
        self.items = [c for c in self.items if c.end <= len(held) and _is_prefix(c.tokens, held)]

    def best(self, prompt: Sequence[int], n: int) -> Checkpoint | None:
        """The latest checkpoint that ends at most at `n` (what the full-attention cache holds of
        the prompt) and whose tokens begin the prompt, or None."""
        fits = [c for c in self.items if 0 < c.end <= n and c.pos_min <= max(0, c.end - self.n_swa)
                and _is_prefix(c.tokens, prompt)]
        return max(fits, key=lambda c: c.end, default=None)

    def restore(self, cp: Checkpoint) -> bool:
        """Put the window back into seq 0 (what llama.cpp held of the SWA layers beyond it goes);
        False when llama.cpp refused it, the checkpoint then dropped. The caller cuts the
        full-attention cache to cp.end first and checks the result before using it."""
        t0 = time.perf_counter()
        size = len(cp.data)
        got = llama_cpp.llama_state_seq_set_data_ext(self.ctx, (ctypes.c_uint8 * size).from_buffer(cp.data),
                                                     size, 0, PARTIAL)
        if got != size:
            self.costs.failed += 1
            self.items = [c for c in self.items if c is not cp]
            log.warning("a sliding-window checkpoint at %d tokens would not load (%d of %d bytes); "
                        "evaluating the prompt again", cp.end, got, size)
            return False
        self.costs.restored += 1
        self.costs.restore_s += time.perf_counter() - t0
        return True


def _is_prefix(head: Sequence[int], seq: Sequence[int]) -> bool:
    return len(head) <= len(seq) and list(head) == list(seq[:len(head)])
