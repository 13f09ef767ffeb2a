"""A request body's fields checked one by one, so a bad value is that line's error, not the batch's.

A parsed JSON value is not a setting yet: `true` is an int to Python, 1e400
parses as infinity (and int() of it raises OverflowError), 5.7 would be cut
to 5 without a word, and a "\\ud800" escape is a str that no UTF-8 file or
tokenizer takes. Every field is checked here, and every failure is a
ValueError naming the field, which read_input turns into an error record.
"""

from __future__ import annotations

import math

from app.engine.prompt import PromptMessage
from app.engine.sampling import GenerationSettings

ROLES = ("system", "user", "assistant")
FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repeat_penalty")
INT_FIELDS = ("top_k", "seed")


def show(v) -> str:
    """A value for a message: repr escapes newlines and lone surrogates, and
    the cut keeps a megabyte-long value from making a megabyte-long line."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def is_text(s) -> bool:
    """A str that can be written as UTF-8 (JSON's "\\ud800" escape makes one that cannot)."""
    if not isinstance(s, str):
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def whole(name: str, v) -> int:
    """An integer field: an int, or a float with no fraction (5.0); bounds are validate()'s."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name} must be a whole number, got {show(v)}")
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ValueError(f"{name} must be a whole number, got {show(v)}")
        return int(v)
    return v


def real(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name} must be a number, got {show(v)}")
    try:
        f = float(v)
    except OverflowError:  # an int with hundreds of digits
        f = math.inf
    if not math.isfinite(f):
        raise ValueError(f"{name} must be a finite number, got {show(v)}")
    return f


def settings_from_body(body: dict, defaults: GenerationSettings) -> GenerationSettings:
    s = GenerationSettings(**defaults.__dict__)
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    if body.get(key) is not None:
        s.max_tokens = whole(key, body[key])
    for name in FLOAT_FIELDS:
        if body.get(name) is not None:
            setattr(s, name, real(name, body[name]))
    for name in INT_FIELDS:
        if body.get(name) is not None:
            setattr(s, name, whole(name, body[name]))
    stop = body.get("stop")
    if stop is not None:
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(is_text(x) for x in stop):
            raise ValueError("stop must be a string or a list of strings")
        s.stop = tuple(stop)
    try:
        s.validate()
    except ValueError as e:
        if key == "max_completion_tokens" and str(e).startswith("max_tokens "):
            raise ValueError(key + str(e)[len("max_tokens"):]) from None
        raise
    return s


def messages(raw) -> list[PromptMessage]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("body.messages must be a non-empty list")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ValueError(f"body.messages[{i}] needs a role among {', '.join(ROLES)}")
        c = m.get("content")
        if isinstance(c, list):  # content parts: only text can be decoded here
            parts = [p for p in c if isinstance(p, dict) and p.get("type") == "text"]
            if not all(isinstance(p.get("text"), str) for p in parts):
                raise ValueError(f"body.messages[{i}].content: a text part's text must be a string")
            c = "".join(p["text"] for p in parts)
        if not isinstance(c, str):
            raise ValueError(f"body.messages[{i}].content must be text, got {show(c)}")
        if not is_text(c):
            raise ValueError(f"body.messages[{i}].content is not valid Unicode (a lone surrogate)")
        out.append(PromptMessage(m["role"], c))
    return out
