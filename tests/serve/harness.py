"""`llamadesk serve` children whose whole environment a test chooses (its log included), and the
helpers the fault tests share: OpenAI's error shape, a batch run to its end, the log's new lines."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx

from tests.remote.servers import Process, free_port
from tests.serve.conftest import MODEL_ID

ERROR_KEYS = {"message", "type", "param", "code"}


def serve_env(home: Path) -> dict:
    """Every folder the server writes, under `home`: its data, and the log a test reads."""
    env = dict(os.environ)
    for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        env[var] = str(home / var.lower())
    return env


def serve_args(model_path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app", "serve", "--model", str(model_path), "--port", str(port),
            "--ctx", "2048", "--threads", "2", *extra]


def start(model_path, home: Path, *extra: str, port: int | None = None) -> Process:
    port = port or free_port()
    return Process(serve_args(model_path, port, *extra), port, "/health", serve_env(home))


def log_text(home: Path) -> str:
    """The server's own log (llamadesk.log under its state folder)."""
    return "".join(p.read_text(errors="replace") for p in home.rglob("llamadesk.log"))


def error(r: httpx.Response, status: int) -> dict:
    """The error of an answer that must be `status` in OpenAI's shape."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, r.text
    assert body["error"]["message"]
    return body["error"]


def request_line(cid: str, model: str = MODEL_ID, content: str = "Name a colour.",
                 max_tokens: int = 4) -> str:
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": model, "max_tokens": max_tokens, "temperature": 0,
                                "messages": [{"role": "user", "content": content}]}})


def upload(base: str, data: bytes, name: str = "in.jsonl") -> dict:
    r = httpx.post(base + "/v1/files", files={"file": (name, data)}, data={"purpose": "batch"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def create_batch(base: str, fid: str) -> dict:
    r = httpx.post(base + "/v1/batches", timeout=30, json={"input_file_id": fid,
                   "endpoint": "/v1/chat/completions", "completion_window": "24h"})
    assert r.status_code == 200, r.text
    return r.json()


def wait_batch(base: str, bid: str, timeout: float = 180, until=("completed", "failed", "cancelled")) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        b = httpx.get(base + f"/v1/batches/{bid}", timeout=30).json()
        if b["status"] in until:
            return b
        assert time.monotonic() < deadline, f"batch {bid} still {b['status']}"
        time.sleep(0.1)


def records(base: str, fid: str | None) -> list[dict]:
    if fid is None:
        return []
    text = httpx.get(base + f"/v1/files/{fid}/content", timeout=30).text
    return [json.loads(s) for s in text.split("\n") if s]


def run_batch(base: str, data: bytes, name: str = "in.jsonl") -> tuple[dict, list[dict], list[dict]]:
    """Upload, create, wait: the batch as it ended, its answers and its error records."""
    b = wait_batch(base, create_batch(base, upload(base, data, name)["id"])["id"])
    return b, records(base, b["output_file_id"]), records(base, b["error_file_id"])
