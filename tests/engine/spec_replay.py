"""Replaying a speculative reply's batches: the check the tests make of its correctness."""

from __future__ import annotations

import llama_cpp
import numpy as np

from app.engine.decoder import Decoder


def _rows(dec: Decoder, toks, pos0: int, every_row: bool) -> list[int]:
    """Evaluate toks at pos0 as one batch; the argmax of each row that has logits."""
    dec._fill(toks, pos0, True, every_row)
    assert llama_cpp.llama_decode(dec.ctx, dec._batch) == 0
    rows = range(len(toks)) if every_row else [len(toks) - 1]
    n = dec.n_vocab
    out = []
    for i in rows:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(dec.ctx, i), shape=(n,))
        out.append(int(logits.argmax()))
    return out


def replay(dec: Decoder, prompt: list[int], reply: list[int], checks) -> list[tuple[int, int]]:
    """(the reply's token, the model's argmax) for every decoded position, the batches as the
    speculating decoder ran them: its prefill chunks, its checks, and one-token steps between."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(dec.ctx), True)
    pairs = []
    for a in range(0, len(prompt), dec.n_batch):
        chunk = prompt[a:a + dec.n_batch]
        first = _rows(dec, chunk, a, False)
    seq = prompt + reply
    pairs.append((seq[len(prompt)], first[-1]))
    by_pos = dict(checks)
    pos = len(prompt)
    while pos + 1 < len(seq):
        batch = by_pos.get(pos)
        if batch is None:
            pairs.append((seq[pos + 1], _rows(dec, [seq[pos]], pos, False)[0]))
            pos += 1
            continue
        assert batch[0] == seq[pos]
        picks = _rows(dec, list(batch), pos, True)
        kept = 0
        for i, pick in enumerate(picks):
            if pos + 1 + i >= len(seq):
                break
            pairs.append((seq[pos + 1 + i], pick))
            if i + 1 < len(batch) and batch[i + 1] == seq[pos + 1 + i]:
                kept += 1
            else:
                break
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(dec.ctx), 0, pos + 1 + kept, -1)
        pos += 1 + kept
    return pairs
