"""Speculative decoding in the batch engine: a slot guesses only while it decodes alone.

A step that carries several slots' tokens already reads the weights once for
all of them, so the cores are busy; a check's extra rows would slow every slot
in it to buy one slot's tokens. A slot that decodes alone (the scheduler's
`alone`: no other slot decoding, no request waiting; a local server's one
client) is in the chat decoder's position, and takes the same parts: the
reply's Speculation from app.engine.speculative (a guesser, and the Pacer that
checks only when a check is expected to pay, judged against the slot's own
plain alone steps), and the slot's own Sampler, whose choice for each row
decides which guesses are kept. While other slots share its steps it decodes
plainly, its guesser following each token it takes, and it guesses again from
the next step it has alone.
"""

from __future__ import annotations

from typing import Protocol

from app.engine.draft import DraftDrafter, DraftModel
from app.engine.speculative import K_MAX, MODES, Drafter, NgramDrafter, Pacer, Speculation

NEVER_ALONE = "other requests shared every step"
# A check's rows: the token just sampled and at most K_MAX guesses.
CHECK_ROWS = K_MAX + 1


class SpeculatingSlot(Protocol):
    """What a slot's Speculation is made from (app.slots.slot.Slot has it)."""

    prompt: list[int]
    fed: list[int]
    pending: int | None
    spec: Speculation | None


class BatchSpeculation:
    """An engine's speculative mode and what carries over from one reply to the next: a plain
    alone step's cost, the yardstick every Pacer starts from, and a draft model's context
    (one, since one slot at a time decodes alone; it catches up with whichever slot that is)."""

    def __init__(self, mode: str, draft: DraftModel | None = None):
        if mode not in MODES or (mode == "draft") != (draft is not None):
            raise ValueError(f"speculative decoding is one of {', '.join(MODES)}, a draft model with "
                             f"draft only; got {mode!r}{' with a draft' if draft is not None else ''}")
        self.mode = mode
        self.draft = draft
        self.plain_s: float | None = None

    def of(self, slot: SpeculatingSlot) -> Speculation:
        """The slot's Speculation, made the first time it decodes alone, so a slot that never does
        pays nothing: a guesser over its prompt and what it has generated, the token to be fed
        next included."""
        if slot.spec is None:
            hist = [*slot.prompt, *slot.fed, *([] if slot.pending is None else [slot.pending])]
            drafter: Drafter = NgramDrafter(hist) if self.draft is None else DraftDrafter(self.draft, hist)
            slot.spec = Speculation(drafter, Pacer(plain_s=self.plain_s))
        return slot.spec

    def plain_step(self, spec: Speculation, dt: float) -> None:
        spec.pacer.plain_step(dt)
        self.plain_s = spec.pacer.plain_s

    def close(self) -> None:
        if self.draft is not None:
            self.draft.close()
            self.draft = None


def accepted_per_pos(spec: Speculation | None) -> list[int]:
    """How many checks kept the guess at each position, up to the last one any kept."""
    if spec is None:
        return []
    got = spec.pacer.kept_at
    n = max((i + 1 for i, c in enumerate(got) if c), default=0)
    return got[:n]


def stats_fields(mode: str | None, spec: Speculation | None) -> dict:
    """A reply's speculation as SlotStats and ReplyStats spell it (none when the engine does not
    speculate); a reply that never decoded alone says so where a stepped-aside reason goes."""
    if mode is None:
        return {}
    if spec is None:
        return {"spec_mode": mode, "spec_stepped_aside": NEVER_ALONE}
    p = spec.pacer
    return {"spec_mode": spec.mode, "draft_tokens": p.drafted, "draft_accepted": p.accepted,
            "spec_checks": p.checks, "spec_stepped_aside": p.stepped_aside}
