"""What every route shares: the framework's own refusals in OpenAI's shape, and a big upload that
leaves the event loop free for everyone else."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import httpx
import pytest

ERROR_KEYS = {"message", "type", "param", "code"}


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"}, r.text  # never FastAPI's {"detail": ...}
    err = r.json()["error"]
    assert set(err) == ERROR_KEYS and err["message"]
    return err


def test_the_frameworks_own_refusals_are_openais_error_shape(serve, client):
    import openai

    assert _error(httpx.get(serve.base + "/v1/nothing", timeout=10), 404)["code"] == "not_found"
    with pytest.raises(openai.NotFoundError) as e:
        client.get("/nothing", cast_to=httpx.Response)
    assert e.value.code == "not_found"  # the official client reads our error, not a bare 404
    r = httpx.delete(serve.base + "/v1/models", timeout=10)
    assert _error(r, 405)["code"] == "method_not_allowed" and r.headers["allow"] == "GET"
    assert _error(httpx.get(serve.base + "/v1/batches?limit=many", timeout=10), 422)["param"] == "limit"
    garbage = httpx.post(serve.base + "/v1/files", content=b"--x\r\nnot a part", timeout=10,
                         headers={"content-type": "multipart/form-data; boundary=x"})
    _error(garbage, 400)
    assert httpx.get(serve.base + "/health", timeout=5).json() == {"status": "ok"}


UPLOADER = """
import sys, time, httpx
t = time.monotonic()
with open(sys.argv[2], "rb") as f:
    r = httpx.post(sys.argv[1] + "/v1/files", files={"file": ("big.jsonl", f)}, data={"purpose": "batch"},
                   timeout=300)
print(r.status_code, time.monotonic() - t, r.text)
"""


def test_a_big_upload_leaves_the_event_loop_free(serve, tmp_path):
    line = json.dumps({"custom_id": "x", "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "m", "messages": [{"role": "user", "content": "y" * 900}]}}) + "\n"
    data = (line * (190 * 1024 * 1024 // len(line))).encode()
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    # The uploader is another process, so its own work cannot delay this one's /health probes.
    worst = 0.0
    with subprocess.Popen([sys.executable, "-c", UPLOADER, serve.base, str(path)], stdout=subprocess.PIPE,
                          text=True) as up, httpx.Client(timeout=60) as c:
        while up.poll() is None:
            t = time.monotonic()
            assert c.get(serve.base + "/health").status_code == 200
            worst = max(worst, time.monotonic() - t)
            time.sleep(0.01)
        status, took_s, body = up.communicate()[0].split(" ", 2)
    took = float(took_s)
    assert status == "200", body
    f = json.loads(body)
    assert f["bytes"] == len(data)
    # Reading, checking and storing 190 MB on the event loop stalled it for half the upload's time
    # and more (over a second here); on a machine this busy a probe may wait a little anyway.
    assert worst < max(0.5, took / 4), f"/health waited {worst:.2f} s during a {took:.1f} s upload"
    digest = hashlib.sha256()
    with httpx.stream("GET", serve.base + f"/v1/files/{f['id']}/content", timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "application/jsonl"
        for piece in r.iter_bytes():
            digest.update(piece)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
