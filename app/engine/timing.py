"""The token clock of one reply, shared by the chat Decoder and each batch slot.

Both report the same three things, measured the same way: when the first and
the last counted token came (an end-of-generation token is not a token of the
reply), when the first visible text came (TTFT), and the decode rate as the
reader saw it, `(generated - 1) / (t_last - t_first)`: intervals between
tokens, so the prefill and the wait for the first token do not dilute it.
"""

from __future__ import annotations


class TokenTimer:
    """perf_counter() stamps of one reply; the caller passes `now`."""

    __slots__ = ("t_first_text", "t_first_tok", "t_last_tok")

    def __init__(self) -> None:
        self.t_first_tok: float | None = None
        self.t_last_tok: float | None = None
        self.t_first_text: float | None = None

    def token(self, now: float) -> None:
        """A token of the reply was sampled."""
        if self.t_first_tok is None:
            self.t_first_tok = now
        self.t_last_tok = now

    def text(self, now: float) -> bool:
        """Text became visible; True the first time (the moment TTFT measures)."""
        if self.t_first_text is None:
            self.t_first_text = now
            return True
        return False

    def ttft_from(self, t: float) -> float | None:
        """Seconds from `t` (submitted, queued, slot start) to the first text; None: no text."""
        return None if self.t_first_text is None else self.t_first_text - t

    @property
    def decode_s(self) -> float:
        """Wall seconds from the first counted token to the last (0.0 before the first)."""
        if self.t_first_tok is None or self.t_last_tok is None:
            return 0.0
        return self.t_last_tok - self.t_first_tok

    def wall_rate(self, generated: int) -> float | None:
        """Tokens per second between the first and the last token; None under two tokens."""
        span = self.decode_s
        if generated > 1 and span > 0:
            return (generated - 1) / span
        return None
