"""The batched ceiling in words, the same in the Batch window's progress line and the Server panel.

Both decode several sequences in one batch and both compare the rate with the
ceiling of the sequences decoding now (app.engine.utilization); one wording
keeps the two windows saying the same thing about the same figure.
"""

from __future__ import annotations


def ceiling_line(p) -> str:
    """' · 31% of the 620 tok/s ceiling for 8 sequences (memory bandwidth)', or nothing."""
    if not p.ceiling_tok_s:
        return ""
    share = f"{100 * p.tok_s / p.ceiling_tok_s:.0f}% of " if p.tok_s else ""
    bound = "memory bandwidth" if p.ceiling_bound == "bandwidth" else "arithmetic"
    seqs = "1 sequence" if p.decoding == 1 else f"{p.decoding} sequences"
    return f" · {share}the {p.ceiling_tok_s:.0f} tok/s ceiling for {seqs} ({bound})"
