"""Batch output: OpenAI batch output records, appended as each request finishes.

Using OpenAI's output format means the results feed the same tooling as a
hosted batch. Each record is flushed as it is written, and the output file
doubles as the resume journal: requests already in it are skipped on the
next run, so a crash or Ctrl+C loses only the requests that were mid-decode.

The journal knows a request by its id (requests.py keeps ids unique), with
one exception: a line refused before decoding (code "invalid_request") is
known by its id and the digest of its text, so once the user fixes that line
it runs on the next pass instead of being taken as done.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from app.batch_jsonl.requests import InputItem
from app.errors import LlamaDeskError
from app.openai_compat.answer import assistant_message
from app.openai_compat.tools import ToolCalls
from app.slots.types import SlotResult, SlotStats

INVALID = "invalid_request"


class BatchOutputError(LlamaDeskError):
    """The output file holds something other than batch output records."""


@dataclass
class Journal:
    done: set[str] = field(default_factory=set)  # custom_ids answered (or failed while decoding)
    refused: set[tuple[str, str]] = field(default_factory=set)  # (custom_id, digest) refused lines

    def has(self, item: InputItem) -> bool:
        return item.custom_id in self.done or (item.custom_id, item.digest) in self.refused


def read_journal(path: str | Path) -> Journal:
    """What an output file already holds, dropping a half-written last line.

    A run killed mid-write leaves a partial line; cutting it keeps the file valid
    JSONL and lets its request run again. A file that is not batch output (the
    input given as -o, someone's notes) is refused, not appended to or cut."""
    j = Journal()
    p = Path(path)
    if not p.exists():
        return j
    data = p.read_bytes()
    keep = data[: data.rfind(b"\n") + 1]
    for n, raw in enumerate(keep.split(b"\n")[:-1], 1):
        rec = _record(raw)
        if rec is None:
            if raw.strip():
                raise BatchOutputError(f"{p}: line {n} is not a batch output record; "
                                       "name a new or earlier output file with -o")
            continue
        err, extra = rec.get("error"), rec.get("llamadesk")
        digest = extra.get("input_sha256") if isinstance(extra, dict) else None
        if isinstance(err, dict) and err.get("code") == INVALID and isinstance(digest, str):
            j.refused.add((rec["custom_id"], digest))
        else:  # records written before digests were: known by id alone
            j.done.add(rec["custom_id"])
    if len(keep) != len(data):
        if not data[len(keep):].lstrip().startswith(b"{"):
            raise BatchOutputError(f"{p}: the last line is not a batch output record; "
                                   "name a new or earlier output file with -o")
        with open(p, "r+b") as f:
            f.truncate(len(keep))
    return j


def _record(raw: bytes) -> dict | None:
    """An output record (OpenAI's shape: custom_id with response or error), else None."""
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("custom_id"), str):
        return None
    return rec if "response" in rec or "error" in rec else None


class ResultWriter:
    """Appends one record per finished request and flushes it at once."""

    def __init__(self, path: str | Path, model_name: str):
        self.path = Path(path)
        self.model_name = model_name
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, res: SlotResult) -> None:
        self._append(output_record(res, self.model_name))

    def write_error(self, item: InputItem) -> None:
        st = SlotStats(stop_reason="error", error=item.error, error_kind=INVALID)
        rec = output_record(SlotResult(item.custom_id, "", st, item.line), self.model_name)
        rec["llamadesk"]["input_sha256"] = item.digest
        self._append(rec)

    def write_answer(self, custom_id: str, line: int, body: dict, seconds: float) -> None:
        """A request answered whole by another endpoint than chat (embeddings): its body as is."""
        usage = body.get("usage") or {}
        self.write_response(custom_id, body, {"line": line, "prompt_tokens": usage.get("prompt_tokens"),
                                              "total_s": round(seconds, 4)})

    def write_response(self, custom_id: str, body: dict, extra: dict) -> None:
        """A request answered with a body its endpoint's own code built (the server's, so a Batch
        API line reads exactly as the same request sent online); `extra` is the record's
        `llamadesk` part, which the server's output file leaves out."""
        rid = body.get("id") if isinstance(body.get("id"), str) else f"batch_req_{uuid.uuid4().hex[:24]}"
        self._append({"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id,
                      "response": {"status_code": 200, "request_id": rid, "body": body}, "error": None,
                      "llamadesk": extra})

    def _append(self, rec: dict) -> None:
        self._f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def output_record(res: SlotResult, model_name: str) -> dict:
    st = res.stats
    rec: dict[str, object] = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": res.custom_id}
    stats = {**st.to_json(), "line": res.line}
    if st.error is not None:
        rec["response"] = None
        rec["error"] = {"code": st.error_kind or "generation_failed", "message": st.error}
    else:
        tools = res.reply_as if isinstance(res.reply_as, ToolCalls) else None
        message, finish = assistant_message(res.text, tools, st.stop_reason)
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": st.prompt_tokens, "completion_tokens": st.completion_tokens,
                      "total_tokens": (None if st.prompt_tokens is None or st.completion_tokens is None
                                       else st.prompt_tokens + st.completion_tokens),
                      "prompt_tokens_details": {"cached_tokens": st.cached_tokens}},
        }
        rec["response"] = {"status_code": 200, "request_id": body["id"], "body": body}
        rec["error"] = None
    rec["llamadesk"] = stats
    return rec
