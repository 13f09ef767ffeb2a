"""Fitting a conversation into the context window.

When history + the new message + the reply budget exceed n_ctx, the oldest
turns go first (never the system prompt), and exactly which ones went is
reported so the window can mark them and the gauges can count them. Silent
truncation is the peers' failure we avoid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.engine.errors import ContextOverflowError
from app.engine.prompt import Msg


@dataclass
class Fit:
    tokens: list[int]
    kept: list[Msg]
    dropped: list[int] = field(default_factory=list)  # indices into history
    dropped_tokens: int = 0


def fit_history(
    system: str | None,
    history: list[Msg],
    new_message: str,
    max_tokens: int,
    n_ctx: int,
    to_tokens: Callable[[list[Msg]], list[int]],
) -> Fit:
    head = [Msg("system", system)] if system and system.strip() else []
    tail = [Msg("user", new_message)]
    start = 0
    full = None
    while True:
        kept = head + history[start:] + tail
        tokens = to_tokens(kept)
        full = full if full is not None else len(tokens)
        if len(tokens) + max_tokens <= n_ctx:
            return Fit(tokens, kept, list(range(start)), full - len(tokens))
        if start >= len(history):
            what = "message with the system prompt" if head else "message"
            raise ContextOverflowError(
                f"the {what} is {len(tokens)} tokens; with max_tokens {max_tokens} it needs "
                f"{len(tokens) + max_tokens} but the context holds {n_ctx}: shorten it, "
                "lower max tokens, or raise the context length"
            )
        # Drop one whole turn: a user message and the reply that answered it.
        start += 1
        while start < len(history) and history[start].role != "user":
            start += 1
