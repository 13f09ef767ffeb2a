"""A request body's fields checked one by one: a bad value is that request's error, naming the field.

A parsed JSON value is not a setting yet: `true` is an int to Python, 1e400
parses as infinity (and int() of it raises OverflowError), 5.7 would be cut
to 5 without a word, and a "\\ud800" escape is a str that no UTF-8 file or
tokenizer takes. Every field is checked here, and every failure is a
ValueError naming the field: a 400 online, an error record in a batch.
"""

from __future__ import annotations

import json
import math

from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings

# "developer" is what newer OpenAI SDK examples send for the system message.
ROLES = ("system", "developer", "user", "assistant", "tool")
FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty")
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


def messages(raw) -> list[MessageBody]:
    """The conversation as the prompt format renders it: a developer message is a system one,
    an assistant's tool calls are written as the JSON it answered with, a tool's result is a
    turn that says which call it answers."""
    if not isinstance(raw, list) or not raw:
        raise ValueError("body.messages must be a non-empty list")
    out = []
    called: dict[str, str] = {}  # tool_call id -> the tool's name
    for i, m in enumerate(raw):
        where = f"body.messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ValueError(f"{where} needs a role among {', '.join(ROLES)}")
        role = m["role"]
        text = _content(m.get("content"), where, may_be_empty=role == "assistant" and "tool_calls" in m)
        if role == "developer":
            role = "system"
        if role == "assistant" and m.get("tool_calls") is not None:
            calls = _calls_text(m["tool_calls"], where, called)  # each call's id is known from here on
            text = text or calls
        if role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or not cid:
                raise ValueError(f"{where}.tool_call_id must name the call this result answers")
            if cid not in called:  # a result for no call: the model would read an answer to nothing
                raise ValueError(f"{where}.tool_call_id {cid!r} matches no tool call of an earlier "
                                 "assistant message")
            role, text = "user", (f"The tool {called[cid]} returned: {text}\n"
                                  "Use this result to answer the request.")
        # An earlier reply's reasoning (llama-server reads it too): the template keeps it or not.
        thought = m.get("reasoning_content") if role == "assistant" else None
        if thought is not None and not is_text(thought):
            raise ValueError(f"{where}.reasoning_content must be text")
        out.append(MessageBody(role, text, reasoning=thought or ""))
    return out


def _content(c, where: str, may_be_empty: bool) -> str:
    """A message's text; a part the model cannot read (an image, audio, a file) is refused, never
    dropped: a model shown nothing would describe what it never saw."""
    if c is None and may_be_empty:
        return ""
    if isinstance(c, list):
        texts = []
        for k, p in enumerate(c):
            kind = p.get("type") if isinstance(p, dict) else None
            if kind != "text":
                raise ValueError(f"{where}.content[{k}] is {kind or 'not a content part'}: this model takes "
                                 "text only")
            if not isinstance(p.get("text"), str):
                raise ValueError(f"{where}.content[{k}]: a text part's text must be a string")
            texts.append(p["text"])
        c = "".join(texts)
    if not isinstance(c, str):
        raise ValueError(f"{where}.content must be text, got {show(c)}")
    if not is_text(c):
        raise ValueError(f"{where}.content is not valid Unicode (a lone surrogate)")
    return c


def _calls_text(calls, where: str, called: dict[str, str]) -> str:
    """An assistant's earlier tool calls, as the generic tool format writes them."""
    if not isinstance(calls, list):
        raise ValueError(f"{where}.tool_calls must be a list")
    shown = []
    for k, c in enumerate(calls):
        f = c.get("function") if isinstance(c, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not is_text(f["name"]):
            raise ValueError(f"{where}.tool_calls[{k}] needs function.name")
        args = f.get("arguments", "{}")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            raise ValueError(f"{where}.tool_calls[{k}].function.arguments is not JSON") from None
        if isinstance(c.get("id"), str):
            called[c["id"]] = f["name"]
        shown.append({"name": f["name"], "arguments": parsed})
    return json.dumps({"tool_calls": shown}, ensure_ascii=False)
