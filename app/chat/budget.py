"""Fitting a conversation into the context window.

When history + the new message + the reply budget exceed n_ctx, the oldest
turns go first (never the system prompt), and exactly which ones went is
reported so the window can mark them and the gauges can count them. Silent
truncation is the peers' failure we avoid.

The reply budget is max tokens when the context has room for it. When it has
not, turns are dropped only until the reply has REPLY_SHARE of the context (or
max tokens, if less), and the reply's budget is what is left, which it says:
a max tokens as large as the context (a setting peers accept) would otherwise
drop the whole history on every turn, or, as before, refuse to send at all.
Only a prompt that leaves no room at all is refused.

The cut is searched, not scanned. Dropping turns one at a time re-rendered
and re-tokenized the whole history per turn, quadratic in its length (a
4,000-message conversation spent minutes here before prefill began). The
answer is the same: the first cut, oldest first, whose prompt fits. That
rests on one property of the formats, that a prompt without a whole turn is
never longer than with it, which makes "fits" false then true along the
cuts. Every prompt tried is still the format's render of exactly the kept
messages, tokenized at once, because a chat template may render a message
differently by its place (Gemma's folds the system prompt into the first
user turn), so per-message token counts could not be summed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.errors import ContextOverflowError
from app.engine.message import MessageBody

REPLY_SHARE = 50  # percent of the context a reply keeps for itself when history must be cut


@dataclass
class Fit:
    tokens: list[int]
    kept: list[MessageBody]
    dropped: list[int] = field(default_factory=list)  # indices into history
    dropped_tokens: int = 0
    budget: int = 0  # the most tokens the reply may have: max tokens, or the context's room

    def limit(self, max_tokens: int) -> int | None:
        """The reply's budget when the context cut it below `max_tokens` (ReplyStats.reply_limit)."""
        return self.budget if self.budget < max_tokens else None


def fit_history(
    system: str | None,
    history: list[MessageBody],
    new_message: str,
    max_tokens: int,
    n_ctx: int,
    to_tokens: Callable[[list[MessageBody]], list[int]],
) -> Fit:
    head = [MessageBody("system", system)] if system and system.strip() else []
    tail = [MessageBody("user", new_message)]
    cuts = _turn_starts(history)
    rendered: dict[int, list[int]] = {}
    latest = [-1]  # the cut rendered last: a template format keeps state from its last render

    def tokens_at(j: int, again: bool = False) -> list[int]:
        if j not in rendered or again:
            rendered[j] = to_tokens(head + history[cuts[j]:] + tail)
            latest[0] = j
        return rendered[j]

    reserve = [max_tokens]

    def fits(j: int) -> bool:
        return len(tokens_at(j)) + reserve[0] <= n_ctx

    last = len(cuts) - 1
    j = 0
    if not fits(0):
        bare = len(tokens_at(last))
        if bare >= n_ctx:  # the decoder needs one cell for the reply's first step
            what = "system prompt, template and your message" if head else "template and your message"
            raise ContextOverflowError(
                f"the prompt is {bare} tokens ({what}) and the context holds {n_ctx}: shorten "
                "the message or the system prompt, or raise the context length"
            )
        reserve[0] = min(max_tokens, REPLY_SHARE * n_ctx // 100, n_ctx - bare)
        if not fits(0):
            j = _first_fit(fits, last)
    # Render the kept messages last, as the scan did: the caller reads the
    # format's stop strings afterwards, and they come from the last render.
    full, tokens = len(tokens_at(0)), tokens_at(j, again=latest[0] != j)
    kept = head + history[cuts[j]:] + tail
    return Fit(tokens, kept, list(range(cuts[j])), full - len(tokens),
               min(max_tokens, n_ctx - len(tokens)))


def _turn_starts(history: list[MessageBody]) -> list[int]:
    """The cuts tried, oldest first: 0, then each later start of a turn (a user
    message: a turn is it and the reply that answered it), then len(history)."""
    cuts = [0]
    n = len(history)
    while cuts[-1] < n:
        s = cuts[-1] + 1
        while s < n and history[s].role != "user":
            s += 1
        cuts.append(s)
    return cuts


def _first_fit(fits: Callable[[int], bool], last: int) -> int:
    """The least j in (0, last] with fits(j), given not fits(0) and fits(last).

    Gallops back from the end before bisecting: what fits is at most n_ctx
    tokens, so the cut is usually near the end, and the renders tried near
    the end are short where bisecting from the middle renders half the history."""
    lo, hi, step = 0, last, 1  # invariant: not fits(lo), fits(hi)
    while hi - step > lo:
        if not fits(hi - step):
            lo = hi - step
            break
        hi -= step
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi
