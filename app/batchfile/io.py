"""Batch files: OpenAI Batch API requests in, OpenAI batch output records out.

Using OpenAI's formats means a batch prepared for a hosted API runs locally
unchanged, and its results feed the same tooling. Each result is appended and
flushed as it finishes, and the output file doubles as the resume journal:
custom_ids already in it are skipped on the next run, so a crash or Ctrl+C
loses only the requests that were mid-decode.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from app.engine.prompt import Msg
from app.batch.types import BatchRequest, BatchResult, BatchStats
from app.errors import LlamaDeskError
from app.engine.sampling import GenerationSettings

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


# -- output ---------------------------------------------------------------------
def done_ids(path: str | Path) -> set[str]:
    """custom_ids already answered in an output file, dropping a half-written last line.

    A run killed mid-write leaves a partial line; cutting it keeps the file valid
    JSONL and lets its request run again."""
    p = Path(path)
    if not p.exists():
        return set()
    data = p.read_bytes()
    keep = data[: data.rfind(b"\n") + 1]
    if len(keep) != len(data):
        with open(p, "r+b") as f:
            f.truncate(len(keep))
    ids = set()
    for raw in keep.splitlines():
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("custom_id"), str):
            ids.add(rec["custom_id"])
    return ids


class ResultWriter:
    """Appends one record per finished request and flushes it at once."""

    def __init__(self, path: str | Path, model_name: str):
        self.path = Path(path)
        self.model_name = model_name
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, res: BatchResult) -> None:
        self._f.write(json.dumps(output_record(res, self.model_name), ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def write_error(self, item: InputItem) -> None:
        self.write(BatchResult(item.custom_id, "", BatchStats(stop_reason="error", error=item.error),
                               item.line))

    def close(self) -> None:
        self._f.close()


def output_record(res: BatchResult, model_name: str) -> dict:
    st = res.stats
    rec = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": res.custom_id}
    stats = {**st.to_json(), "line": res.line}
    if st.error is not None:
        rec["response"] = None
        rec["error"] = {"code": "invalid_request" if st.slot is None else "generation_failed",
                        "message": st.error}
    else:
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": res.text},
                         "finish_reason": "length" if st.stop_reason == "length" else "stop"}],
            "usage": {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.completion_tokens,
                      "total_tokens": st.prompt_tokens + st.completion_tokens},
        }
        rec["response"] = {"status_code": 200, "request_id": body["id"], "body": body}
        rec["error"] = None
    rec["llamadesk"] = stats
    return rec
