"""Bodies and requests a buggy client sends: each is one 400 (or 404) in OpenAI's shape naming the
problem, and one line in the server's log, never a 500 with a Python exception's name; a client
that hangs up mid-body is not a crash; a parameter the server would not honour is refused."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from tests.serve.conftest import MODEL_ID
from tests.serve.harness import create_batch, error, log_text, request_line, start, upload

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("path, body, says", [
    ("/v1/chat/completions", b'{"\\ud800": 1, "model": "m"}', "not valid Unicode"),
    ("/v1/batches", b'{"input_file_id": "x", "\\udfff": {"a": 1}}', "not valid Unicode"),
    ("/v1/chat/completions", b"[" * 100_000, "nested more than"),
    ("/v1/completions", b'{"a":' * 5000 + b"1" + b"}" * 5000, "nested more than"),
    ("/v1/chat/completions", f'{{"model": "{MODEL_ID}", "messages": {"[" * 200 + "]" * 200}}}'.encode(),
     "nested more than"),
])
def test_a_lone_surrogate_field_name_or_deep_nesting_is_one_400(serve, path, body, says):
    err = error(httpx.post(serve.base + path, content=body, headers=JSON, timeout=30), 400)
    assert says in err["message"] and err["code"] == "invalid_json"
    assert "Error" not in err["message"]  # no Python exception's name


def _hang_up_mid_body(port: int, path: str, ctype: str, start_of_body: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {ctype}\r\n"
                  f"Content-Length: 100000\r\n\r\n".encode() + start_of_body)
        time.sleep(0.3)


def test_a_client_that_hangs_up_mid_body_is_no_crash_and_a_missing_file_is_a_404(model_path, tmp_path):
    import os

    srv = start(model_path, tmp_path)
    try:
        _hang_up_mid_body(srv.port, "/v1/chat/completions", "application/json", b'{"model": "x", "mess')
        part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n{"custom_id"'
        _hang_up_mid_body(srv.port, "/v1/files", "multipart/form-data; boundary=b", part)
        # Someone cleans the data folder: the file's content is gone, its record is not.
        f = upload(srv.base, (request_line("a") + "\n").encode())
        os.remove(tmp_path / "xdg_data_home" / "llamadesk" / "serve" / "files" / f["id"])
        err = error(httpx.get(srv.base + f"/v1/files/{f['id']}/content", timeout=10), 404)
        assert f["id"] in err["message"] and "no longer" in err["message"]
        assert httpx.get(srv.base + "/health", timeout=5).status_code == 200
        deadline = time.monotonic() + 5
        while log_text(tmp_path).count("closed the connection") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        srv.stop()
    log = log_text(tmp_path) + srv.tail()
    hung_up = "the client closed the connection before its body was whole"
    # Once in the log file and once on the server's terminal, each.
    assert log_text(tmp_path).count(hung_up) == 2 and srv.tail().count(hung_up) == 2, log[-2000:]
    for crash in ("ClientDisconnect", "crashed", "Traceback", "Exception in ASGI"):
        assert crash not in log
    assert f"/v1/files/{f['id']}/content 404" in log  # the refusal's one line


def _batch_body(fid: str, **extra) -> dict:
    return {"input_file_id": fid, "endpoint": "/v1/chat/completions", "completion_window": "24h", **extra}


def test_a_create_call_refuses_what_it_would_not_honour_and_bad_metadata(serve):
    base = serve.base
    fid = upload(base, (request_line("a") + "\n").encode())["id"]
    cases = [
        (_batch_body(fid, output_expires_after={"anchor": "created_at", "seconds": 3600}),
         "output_expires_after"),
        (_batch_body(fid, frobnicate=1), "frobnicate"),
        (_batch_body(fid, metadata={"k": {"deep": 1}}), "metadata"),
        (_batch_body(fid, metadata={f"k{i}": "v" for i in range(17)}), "metadata"),
        (_batch_body(fid, metadata={"k": "v" * 513}), "metadata"),
    ]
    for body, param in cases:
        assert error(httpx.post(base + "/v1/batches", json=body, timeout=30), 400)["param"] == param, body
    listed = httpx.get(base + "/v1/batches?limit=100", timeout=10).json()["data"]
    # A lone surrogate in metadata was stored, ran, and made every later listing a 500.
    raw = json.dumps(_batch_body(fid, metadata={"k": "\ud800"})).encode()  # ASCII, the escape kept
    err = error(httpx.post(base + "/v1/batches", content=raw, headers=JSON, timeout=30), 400)
    assert err["param"] == "metadata" and "surrogate" in err["message"]
    after = httpx.get(base + "/v1/batches?limit=100", timeout=10)
    assert after.status_code == 200 and len(after.json()["data"]) == len(listed)  # nothing was stored
    out = httpx.get(base + "/v1/files", timeout=10).json()["data"]
    batch_out = [f for f in out if f["purpose"] == "batch_output"]
    if batch_out:  # an output file is not a batch's input
        assert error(httpx.post(base + "/v1/batches", json=_batch_body(batch_out[0]["id"]), timeout=30),
                     400)["param"] == "input_file_id"


def test_an_upload_is_a_purpose_and_one_file(serve):
    url, line = serve.base + "/v1/files", (request_line("a") + "\n").encode()
    extra = httpx.post(url, files={"file": ("a.jsonl", line)}, timeout=30,
                       data={"purpose": "batch", "expires_after[anchor]": "created_at"})
    assert error(extra, 400)["param"] == "expires_after[anchor]"
    two = httpx.post(url, files=[("file", ("a.jsonl", line)), ("file", ("b.jsonl", line))],
                     data={"purpose": "batch"}, timeout=30)
    assert error(two, 400)["param"] == "file"
    as_json = httpx.post(url, json={"purpose": "batch", "file": "x"}, timeout=30)
    assert error(as_json, 415)["code"] == "unsupported_media_type"


def test_listings_page_with_after_and_refuse_what_they_do_not_honour(serve):
    base = serve.base
    fid = upload(base, (request_line("p") + "\n").encode())["id"]
    made = [create_batch(base, fid)["id"] for _ in range(3)]
    full = httpx.get(base + "/v1/batches?limit=100", timeout=10).json()
    ids = [b["id"] for b in full["data"]]
    assert ids[:3] == made[::-1] and full["has_more"] is False  # newest first
    first = httpx.get(base + "/v1/batches?limit=2", timeout=10).json()
    assert [b["id"] for b in first["data"]] == ids[:2] and first["has_more"] is True
    second = httpx.get(base + f"/v1/batches?limit=2&after={first['last_id']}", timeout=10).json()
    assert [b["id"] for b in second["data"]] == ids[2:4]
    assert error(httpx.get(base + "/v1/batches?after=batch_nope", timeout=10), 400)["param"] == "after"
    assert error(httpx.get(base + "/v1/batches?limit=1000", timeout=10), 400)["param"] == "limit"
    assert error(httpx.get(base + "/v1/batches?order=asc", timeout=10), 400)["param"] == "order"
    assert error(httpx.get(base + f"/v1/batches/{made[0]}?expand=1", timeout=10), 400)["param"] == "expand"
    files = httpx.get(base + "/v1/files?purpose=batch&limit=1", timeout=10).json()
    assert [f["id"] for f in files["data"]] == [fid] and files["has_more"] is True
    assert error(httpx.get(base + "/v1/files?order=sideways", timeout=10), 400)["param"] == "order"
