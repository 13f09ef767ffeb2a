"""The thinking budget: llama.cpp's reasoning-budget sampler, as a state machine the Sampler asks.

The states and their order are llama.cpp's (common/reasoning-budget.cpp):
IDLE watches for the start marker; COUNTING counts reasoning tokens down and
watches for the end marker; when the budget is spent WAITING_UTF8 lets a
character split across tokens finish; FORCING hands the Sampler the budget
message and the end marker one token at a time; DONE passes everything
through, until a new start marker re-arms it. A reply whose generation prompt
opened the reasoning starts in COUNTING, as llama.cpp's does after accepting
the prompt's own tokens.

Markers are matched on the tokens' bytes rather than on one tokenization of
them: a model (or a grammar holding it) may spell `</think>` as three tokens
where the tokenizer would have used one, and it still ends the reasoning.
The per-token cost is one piece lookup and a bytes comparison; with no budget
and nothing to watch for, the Sampler does not ask at all.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

IDLE, COUNTING, WAITING_UTF8, FORCING, DONE = "idle", "counting", "waiting_utf8", "forcing", "done"
UNLIMITED = 2**31 - 1  # llama.cpp's INT_MAX: a budget that only watches


def utf8_complete(data: bytes) -> bool:
    """Whether `data` ends on a character's edge (llama.cpp's common_utf8_is_complete)."""
    for i in range(1, min(4, len(data)) + 1):
        c = data[-i]
        if c & 0xC0 != 0x80:
            return i >= (4 if c >= 0xF0 else 3 if c >= 0xE0 else 2 if c >= 0xC0 else 1)
    return not data


class _Matcher:
    """Which of a few byte strings the text so far ends with (the longest), since the last reset."""

    def __init__(self, seqs: Sequence[bytes]):
        self.seqs = sorted({s for s in seqs if s}, key=len, reverse=True)
        self._longest = len(self.seqs[0]) if self.seqs else 0
        self._tail = b""

    def advance(self, piece: bytes) -> bytes | None:
        if not self.seqs:
            return None
        self._tail = (self._tail + piece)[-self._longest:]
        for s in self.seqs:
            if self._tail.endswith(s):
                self._tail = b""
                return s
        return None

    def reset(self) -> None:
        self._tail = b""


Piece = Callable[[int], bytes]


class ReasoningBudget:
    """One reply's budget. `piece(tok)` gives a token's bytes (special tokens rendered)."""

    def __init__(self, piece: Piece, start: Sequence[bytes], end: Sequence[bytes],
                 forced: Sequence[int], budget: int = UNLIMITED, state: str = IDLE):
        self.piece = piece
        self.start, self.end = _Matcher(start), _Matcher(end)
        self.forced_tokens = tuple(forced)
        self.budget = UNLIMITED if budget is None or budget < 0 else budget
        self.remaining = self.budget
        self.state = FORCING if state == COUNTING and self.budget <= 0 else state
        self.force_pos = 0
        self.end_match: bytes | None = None  # the end marker that led to DONE (None: none yet)
        self.n = 0  # tokens accepted
        self._utf8 = b""
        self.forced_at: int | None = None  # tokens accepted when forcing began (None: never)

    @property
    def forcing(self) -> bool:
        return self.state == FORCING and self.force_pos < len(self.forced_tokens)

    def forced(self) -> int:
        """The token the Sampler must return now (only while `forcing`)."""
        if self.forced_at is None:
            self.forced_at = self.n
        return self.forced_tokens[self.force_pos]

    def force(self) -> bool:
        """End the reasoning now (a user's "answer now"): only while counting, as llama.cpp's."""
        if self.state != COUNTING:
            return False
        self._to_forcing()
        return True

    def _to_forcing(self) -> None:
        self.state, self.force_pos = FORCING, 0
        self.end.reset()

    def _arm(self) -> None:
        self.state, self.remaining, self.end_match = COUNTING, self.budget, None
        self.end.reset()
        if self.remaining <= 0:
            self.state, self.force_pos = FORCING, 0

    def accept(self, tok: int) -> None:
        self.n += 1
        st = self.state
        if st in (IDLE, DONE):
            if self.start.advance(self.piece(tok)) is not None:
                self._arm()
            return
        piece = self.piece(tok)
        if st == FORCING:
            match = self.end.advance(piece)
            self.force_pos += 1
            if self.force_pos >= len(self.forced_tokens):
                self.state, self.end_match = DONE, match
                self.start.reset()
            return
        match = self.end.advance(piece)
        if match is not None:
            self.state, self.end_match = DONE, match
            self.start.reset()
            return
        # Over the last bytes rather than the piece alone (llama.cpp's check): a token holding only
        # a character's last byte completes it.
        self._utf8 = (self._utf8 + piece)[-4:]
        complete = utf8_complete(self._utf8)
        if st == WAITING_UTF8:
            if complete:
                self._to_forcing()
            return
        self.remaining -= 1
        if self.remaining <= 0:
            if complete:
                self._to_forcing()
            else:
                self.state = WAITING_UTF8
                self.end.reset()


def vocab_piece(vocab, special: bool = True) -> Piece:
    """A token's bytes from llama.cpp's vocabulary; `special` renders control tokens too (a
    marker may be one), as the decoder's own text does not."""
    import llama_cpp

    buf = ctypes.create_string_buffer(256)
    to_piece = llama_cpp.llama_token_to_piece
    seen: dict[int, bytes] = {}  # a reply repeats its tokens: a lookup instead of a C call

    def piece(tok: int) -> bytes:
        got = seen.get(tok)
        if got is None:
            n = to_piece(vocab, tok, buf, 256, 0, special)
            got = seen[tok] = buf.raw[:n] if n > 0 else b""
        return got

    return piece
