"""Log-probabilities in the two shapes OpenAI gives them: a chat choice's `content` entries (each
token with its bytes and its alternatives) and a completion choice's parallel lists (tokens,
token_logprobs, top_logprobs as {text: logprob}, text_offset), which evaluators such as lm-eval
read by position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

from app.engine.logprobs import TokenLogprob

Piece = Callable[[int], bytes]


class TopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]


class ChatLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class ChatLogprobs(TypedDict):
    content: list[ChatLogprob]
    refusal: None


class CompletionLogprobs(TypedDict):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def chat(entries: Sequence[TokenLogprob], piece: Piece) -> ChatLogprobs:
    def one(tok: int, lp: float) -> TopLogprob:
        b = piece(tok)
        return {"token": _text(b), "logprob": lp, "bytes": list(b)}

    content: list[ChatLogprob] = [{**one(e.token, e.logprob),
                                   "top_logprobs": [one(t, lp) for t, lp in e.top]} for e in entries]
    return {"content": content, "refusal": None}


def completion(tokens: Sequence[int], entries: Sequence[TokenLogprob | None], piece: Piece,
               start: int = 0) -> CompletionLogprobs:
    """`entries[i]` is token i's (None where nothing predicts it: an echoed prompt's first token);
    offsets count characters from `start`, where the first token's text begins."""
    out: CompletionLogprobs = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    at = start
    for tok, e in zip(tokens, entries, strict=True):
        text = _text(piece(tok))
        out["tokens"].append(text)
        out["text_offset"].append(at)
        at += len(text)
        out["token_logprobs"].append(None if e is None else e.logprob)
        if e is None:
            out["top_logprobs"].append(None)
        else:
            top: dict[str, float] = {}
            for t, lp in e.top:  # likeliest first: two tokens with one text keep the likelier
                top.setdefault(_text(piece(t)), lp)
            out["top_logprobs"].append(top)
    return out


def merge(a: CompletionLogprobs, b: CompletionLogprobs) -> CompletionLogprobs:
    return {"tokens": [*a["tokens"], *b["tokens"]],
            "token_logprobs": [*a["token_logprobs"], *b["token_logprobs"]],
            "top_logprobs": [*a["top_logprobs"], *b["top_logprobs"]],
            "text_offset": [*a["text_offset"], *b["text_offset"]]}


def shown_bytes(text: str, reasoning: str = "") -> int:
    """How much of a whole reply its logprobs cover: its text, or every counted token of a thinking
    reply (its reasoning, the markers the split took out, and its answer): the answer's bytes alone
    would pair the answer with the reasoning's first tokens."""
    return (1 << 62) if reasoning else len(text.encode("utf-8"))


class Visible:
    """Which tokens' logprobs a reply's text shows, fed in order: the tokens of a stop string are
    cut with it (they are past the visible text), an end-of-generation token (no text) is kept.
    Counted in bytes, so a character split over two tokens counts once."""

    def __init__(self, piece: Piece, strip_leading: bool):
        self.piece, self.strip = piece, strip_leading
        self.written = b""
        self.consumed = 0  # entries seen, kept or cut

    def take(self, entries: Sequence[TokenLogprob], visible_bytes: int) -> list[TokenLogprob]:
        """Of `entries`, those the text so far (`visible_bytes` long) shows."""
        out = []
        for e in entries:
            self.consumed += 1
            b = self.piece(e.token)
            before = self.written.lstrip() if self.strip else self.written
            if b and len(before) >= visible_bytes:
                continue
            self.written += b
            out.append(e)
        return out
