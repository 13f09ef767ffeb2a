"""A web page cannot drive or read the server: the Host check (DNS rebinding), the Origin check and
CORS for allowed origins only, JSON routes that take only application/json, and the key on
everything but /health; real servers, real sockets, headers as browsers send them."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from tests.serve.conftest import MODEL_ID
from tests.serve.harness import error, log_text, start, upload

CHAT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
PAGE = "http://app.example:3000"
KEY = "sk-guard-0123456789"


def _generated(base: str) -> float:
    """Chat completions answered so far, as /metrics counts them."""
    for line in httpx.get(base + "/metrics", timeout=10).text.splitlines():
        if line.startswith('llamadesk_requests_total{endpoint="/v1/chat/completions",outcome="200"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_web_page_can_neither_drive_nor_read_the_server(serve):
    base, port = serve.base, serve.port
    url = base + "/v1/chat/completions"
    before = _generated(base)
    # A "simple" request (no preflight): text/plain from another origin, and without an Origin at all.
    simple = httpx.post(url, content=json.dumps(CHAT), timeout=30,
                        headers={"content-type": "text/plain;charset=UTF-8", "origin": "http://evil.example"})
    assert error(simple, 403)["code"] == "origin_not_allowed"
    assert error(httpx.post(url, content=json.dumps(CHAT), timeout=30,
                            headers={"content-type": "text/plain"}), 415)["code"] == "unsupported_media_type"
    blob = httpx.post(url, content=json.dumps(CHAT).encode(), timeout=30)  # a Blob body: no Content-Type
    assert error(blob, 415)["code"] == "unsupported_media_type"
    form = httpx.post(base + "/v1/batches", content=b"input_file_id=x", timeout=30,
                      headers={"content-type": "application/x-www-form-urlencoded"})
    assert error(form, 415)["code"] == "unsupported_media_type"
    assert _generated(base) == before  # none of them ran a generation
    # DNS rebinding: the page's own name, resolved to 127.0.0.1, reads nothing.
    f = upload(base, b'{"custom_id": "secret"}\n')
    for path in ("/v1/files", f"/v1/files/{f['id']}/content", "/v1/models", "/metrics", "/health"):
        r = httpx.get(base + path, headers={"host": f"attacker.example:{port}"}, timeout=10)
        assert error(r, 421)["code"] == "host_not_allowed" and "secret" not in r.text
    assert error(httpx.post(url, json=CHAT, headers={"host": "attacker.example"}, timeout=30), 421)
    for origin in ("http://evil.example", "null"):
        assert error(httpx.get(base + "/v1/files", headers={"origin": origin}, timeout=10), 403)
    no_origin = httpx.get(base + "/v1/files", timeout=10, headers={"sec-fetch-site": "cross-site"})
    assert error(no_origin, 403)["code"] == "origin_not_allowed"
    pre = httpx.options(url, timeout=10, headers={"origin": "http://evil.example",
                                                  "access-control-request-method": "POST"})
    assert error(pre, 403) and "access-control-allow-origin" not in pre.headers
    # What programs and the window's own clients send still works.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        assert httpx.get(base + "/v1/models", headers={"host": host}, timeout=10).status_code == 200, host
    ok = httpx.post(url, content=json.dumps(CHAT), timeout=30,
                    headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200 and "access-control-allow-origin" not in ok.headers
    assert _generated(base) == before + 1


def test_allowed_origins_and_names_get_cors_and_the_key_guards_all_but_health(model_path, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("GUARD_KEY", KEY)
    srv = start(model_path, tmp_path, "--allow-origin", PAGE, "--allow-host", "LLM.lan", "--api-key-env",
                "GUARD_KEY")
    base, url, auth = srv.base, srv.base + "/v1/chat/completions", {"authorization": f"Bearer {KEY}"}
    try:
        # The preflight carries no key; the allowed page gets its yes, with the headers it asked for.
        asks = {"origin": PAGE, "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type"}
        pre = httpx.options(url, timeout=10, headers=asks)
        assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == PAGE
        assert "authorization" in pre.headers["access-control-allow-headers"]
        r = httpx.post(url, json=CHAT, headers={"origin": PAGE, **auth}, timeout=30)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE
        with httpx.stream("POST", url, json={**CHAT, "stream": True}, headers={"origin": PAGE, **auth},
                          timeout=30) as s:
            assert s.status_code == 200 and s.headers["access-control-allow-origin"] == PAGE
            assert any(line == "data: [DONE]" for line in s.iter_lines())
        assert error(httpx.post(url, json=CHAT, headers={"origin": "http://app.example:3001", **auth},
                                timeout=30), 403)
        named = httpx.get(base + "/v1/models", headers={"host": "llm.lan", **auth}, timeout=10)
        assert named.status_code == 200
        assert error(httpx.get(base + "/v1/models", headers={"host": "other.lan", **auth}, timeout=10), 421)
        # The key: /metrics says what the server does, so it needs it too; /health does not.
        assert error(httpx.get(base + "/metrics", timeout=10), 401)["code"] == "invalid_api_key"
        assert error(httpx.get(base + "/nothing", timeout=10), 401)
        assert httpx.get(base + "/metrics", headers=auth, timeout=10).status_code == 200
        assert httpx.get(base + "/health", timeout=10).json() == {"status": "ok"}
    finally:
        srv.stop()
    log = log_text(tmp_path)
    assert "/v1/models 421" in log and "/metrics 401" in log and "/v1/chat/completions 403" in log
    assert "Traceback" not in log + srv.tail()


@pytest.mark.parametrize("flag, value, says", [
    ("--allow-origin", "*", "name each origin"),
    ("--allow-origin", "http://app.example:3000/path", "is not an origin"),
    ("--allow-origin", "app.example", "is not an origin"),
    ("--allow-host", "http://llm.lan", "is not a host name"),
])
def test_a_bad_allow_flag_is_one_line_before_the_model_loads(model_path, flag, value, says):
    r = subprocess.run([sys.executable, "-m", "app", "serve", "--model", str(model_path), flag, value],
                       capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("llamadesk: error: ") and says in lines[0]
