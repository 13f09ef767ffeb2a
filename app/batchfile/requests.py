"""Batch input: OpenAI Batch API request lines (or one plain prompt per line) in.

Using OpenAI's request format means a batch prepared for a hosted API runs
locally unchanged. A bad line does not stop the run: it becomes an item with
an error, which the output records like any other result; only an input that
is unusable as a whole raises BatchInputError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.batch.types import BatchRequest
from app.engine.prompt import Msg
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError

CHAT_URL = "/v1/chat/completions"
ROLES = ("system", "user", "assistant")


class BatchInputError(LlamaDeskError):
    """The input file as a whole cannot be used (missing, unreadable, empty)."""


@dataclass
class InputItem:
    line: int
    custom_id: str
    request: BatchRequest | None = None
    error: str | None = None  # this line becomes an error record


def read_input(path: str | Path, defaults: GenerationSettings) -> list[InputItem]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BatchInputError(f"{p}: not UTF-8 text") from None
    except OSError as e:
        raise BatchInputError(f"{p}: cannot read ({e.strerror or e})") from None
    lines = [(i, s) for i, s in enumerate(text.splitlines(), 1) if s.strip()]
    if not lines:
        raise BatchInputError(f"{p}: the input is empty (no requests)")
    as_jsonl = p.suffix.lower() in (".jsonl", ".json") or lines[0][1].lstrip().startswith("{")
    items = [_parse_json_line(i, s, defaults) if as_jsonl else _plain(i, s, defaults) for i, s in lines]
    seen: set[str] = set()
    for it in items:
        if it.custom_id in seen and it.error is None:
            it.error, it.request = f"duplicate custom_id {it.custom_id!r}", None
            it.custom_id = f"{it.custom_id}#line-{it.line}"
        seen.add(it.custom_id)
    return items


def _plain(line: int, s: str, defaults: GenerationSettings) -> InputItem:
    cid = f"line-{line}"
    req = BatchRequest(cid, [Msg("user", s.strip())], _copy(defaults), line=line)
    return InputItem(line, cid, req)


def _copy(s: GenerationSettings) -> GenerationSettings:
    return GenerationSettings(**s.__dict__)


def _parse_json_line(line: int, s: str, defaults: GenerationSettings) -> InputItem:
    cid = f"line-{line}"
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        return InputItem(line, cid, error=f"line {line}: malformed JSON ({e.msg})")
    if not isinstance(obj, dict):
        return InputItem(line, cid, error=f"line {line}: expected a JSON object")
    if isinstance(obj.get("custom_id"), str) and obj["custom_id"]:
        cid = obj["custom_id"]
    else:
        return InputItem(line, cid, error=f"line {line}: missing custom_id")
    try:
        method = obj.get("method", "POST")
        if method != "POST":
            raise ValueError(f"unsupported method {method!r}")
        if obj.get("url") != CHAT_URL:
            raise ValueError(f"unknown url {obj.get('url')!r}; only {CHAT_URL} is served")
        body = obj.get("body")
        if not isinstance(body, dict):
            raise ValueError("body must be an object")
        req = BatchRequest(cid, _messages(body.get("messages")), _settings(body, defaults), line=line)
    except (ValueError, TypeError) as e:
        return InputItem(line, cid, error=f"line {line}: {e}")
    return InputItem(line, cid, req)


def _messages(raw) -> list[Msg]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("body.messages must be a non-empty list")
    out = []
    for m in raw:
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ValueError(f"each message needs a role among {', '.join(ROLES)}")
        c = m.get("content")
        if isinstance(c, list):  # content parts: only text can be decoded here
            c = "".join(part.get("text", "") for part in c
                        if isinstance(part, dict) and part.get("type") == "text")
        if not isinstance(c, str):
            raise ValueError("message content must be text")
        out.append(Msg(m["role"], c))
    return out


def _settings(body: dict, defaults: GenerationSettings) -> GenerationSettings:
    s = _copy(defaults)
    mt = body.get("max_completion_tokens", body.get("max_tokens"))
    if mt is not None:
        s.max_tokens = int(mt)
    for key in ("temperature", "top_p", "min_p", "repeat_penalty"):
        if body.get(key) is not None:
            setattr(s, key, float(body[key]))
    if body.get("top_k") is not None:
        s.top_k = int(body["top_k"])
    if body.get("seed") is not None:
        s.seed = int(body["seed"])
    stop = body.get("stop")
    if stop is not None:
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
            raise ValueError("stop must be a string or a list of strings")
        s.stop = tuple(stop)
    s.validate()
    return s
