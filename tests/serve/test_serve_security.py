"""Binding, keys and load: refuse to start exposed without a key, 401 for a wrong one, 429 past
the queue bound."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.remote.servers import free_port
from tests.serve.conftest import MODEL_ID, start_serve

KEY = "sk-serve-0123456789abcdef"


def test_binding_beyond_loopback_without_a_key_is_refused_in_one_line(model_path):
    r = subprocess.run([sys.executable, "-m", "app", "serve", "--model", str(model_path), "--host", "0.0.0.0",
                        "--port", str(free_port())], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--api-key-env" in lines[0] and "0.0.0.0" in lines[0]


@pytest.fixture
def keyed(model_path, monkeypatch):
    monkeypatch.setenv("LLAMADESK_SERVE_KEY", KEY)
    srv = start_serve(model_path, tempfile.mkdtemp(), "--api-key-env", "LLAMADESK_SERVE_KEY")
    yield srv
    srv.stop()


def test_the_key_is_required_and_checked(keyed):
    from openai import AuthenticationError, OpenAI

    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert httpx.post(keyed.base + "/v1/chat/completions", json=body, timeout=30).status_code == 401
    bad = httpx.post(keyed.base + "/v1/chat/completions", json=body, timeout=30,
                     headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(AuthenticationError):
        OpenAI(base_url=keyed.base + "/v1", api_key="wrong", max_retries=0).models.list()
    ok = OpenAI(base_url=keyed.base + "/v1", api_key=KEY, max_retries=0)
    assert ok.chat.completions.create(**body).choices[0].message.content is not None
    assert httpx.get(keyed.base + "/health", timeout=5).status_code == 200  # no key for the probe


def test_past_the_queue_bound_429_with_retry_after(model_path):
    srv = start_serve(model_path, tempfile.mkdtemp(), "--parallel", "1", "--max-waiting", "1")
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Write a story."}],
            "max_tokens": 64, "ignore_eos": True}
    try:
        with ThreadPoolExecutor(8) as pool:
            url = srv.base + "/v1/chat/completions"
            rs = list(pool.map(lambda _: httpx.post(url, json=body, timeout=120), range(8)))
    finally:
        srv.stop()
    codes = sorted(r.status_code for r in rs)
    assert 200 in codes and 429 in codes, codes
    busy = next(r for r in rs if r.status_code == 429)
    assert busy.headers["retry-after"] == "1" and busy.json()["error"]["type"] == "rate_limit_error"
    assert os.environ.get("LLAMADESK_SERVE_KEY") is None
