"""Batch output: OpenAI batch output records, appended as each request finishes.

Using OpenAI's output format means the results feed the same tooling as a
hosted batch. Each record is flushed as it is written, and the output file
doubles as the resume journal: custom_ids already in it are skipped on the
next run, so a crash or Ctrl+C loses only the requests that were mid-decode.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from app.batch.types import BatchResult, BatchStats
from app.batchfile.requests import InputItem


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
        st = BatchStats(stop_reason="error", error=item.error, error_kind="invalid_request")
        self.write(BatchResult(item.custom_id, "", st, item.line))

    def close(self) -> None:
        self._f.close()


def output_record(res: BatchResult, model_name: str) -> dict:
    st = res.stats
    rec = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": res.custom_id}
    stats = {**st.to_json(), "line": res.line}
    if st.error is not None:
        rec["response"] = None
        rec["error"] = {"code": st.error_kind or "generation_failed", "message": st.error}
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
