"""Filling a llama_batch with one sequence's tokens: the chat's decoder, a draft model, the
embedding and scoring contexts and the structured bench all feed llama.cpp this way, and only
differ in which rows ask for logits."""

from __future__ import annotations

from collections.abc import Sequence


def fill(batch, tokens: Sequence[int], pos0: int, every_row: bool = False, last: bool = True) -> None:
    """`tokens` at positions from `pos0` of sequence 0; logits for every row, or for the last
    one only (`last`), or for none."""
    for i, t in enumerate(tokens):
        batch.token[i] = t
        batch.pos[i] = pos0 + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = every_row
    if last:
        batch.logits[len(tokens) - 1] = 1
    batch.n_tokens = len(tokens)
