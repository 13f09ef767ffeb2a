"""The Batch API through the official `openai` package: upload, create, poll, fetch, cancel;
and a server killed mid-batch that finishes it after a restart, every custom_id exactly once."""

from __future__ import annotations

import io
import json
import signal
import tempfile
import time

import httpx

from tests.serve.conftest import MODEL_ID, start_serve


def _jsonl(n: int, max_tokens: int = 8, bad: bool = False) -> bytes:
    lines = [json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": MODEL_ID, "max_tokens": max_tokens, "temperature": 0,
                                  "messages": [{"role": "user", "content": f"Name thing number {i}."}]}})
             for i in range(n)]
    if bad:
        lines.append(json.dumps({"custom_id": "broken", "method": "POST", "url": "/v1/chat/completions",
                                 "body": {"model": MODEL_ID, "messages": "not a list"}}))
    return ("\n".join(lines) + "\n").encode()


def _wait(client, bid: str, until=("completed", "failed", "cancelled"), timeout=180):
    deadline = time.monotonic() + timeout
    seen = set()
    while time.monotonic() < deadline:
        b = client.batches.retrieve(bid)
        seen.add((b.status, b.request_counts.completed))
        if b.status in until:
            return b, seen
        time.sleep(0.2)
    raise AssertionError(f"batch {bid} still {b.status}")


def test_a_batch_from_upload_to_output_and_error_files(client):
    f = client.files.create(file=("in.jsonl", io.BytesIO(_jsonl(6, bad=True))), purpose="batch")
    assert f.purpose == "batch" and f.bytes > 0 and client.files.retrieve(f.id).id == f.id
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert b.status in ("validating", "in_progress") and b.input_file_id == f.id
    done, seen = _wait(client, b.id)
    assert done.status == "completed" and done.completed_at
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (7, 6, 1)
    assert len({c for _, c in seen}) >= 2  # the counts moved while it ran
    out = [json.loads(s) for s in client.files.content(done.output_file_id).text.splitlines()]
    assert sorted(o["custom_id"] for o in out) == [f"req-{i}" for i in range(6)]
    for o in out:
        body = o["response"]["body"]
        assert o["error"] is None and o["response"]["status_code"] == 200
        assert body["choices"][0]["message"]["content"] and body["usage"]["completion_tokens"] > 0
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] >= 0
    errs = [json.loads(s) for s in client.files.content(done.error_file_id).text.splitlines()]
    assert [e["custom_id"] for e in errs] == ["broken"] and "messages" in errs[0]["error"]["message"]
    assert b.id in [x.id for x in client.batches.list()]


def test_cancel_stops_a_running_batch_and_keeps_what_finished(client):
    f = client.files.create(file=("big.jsonl", io.BytesIO(_jsonl(40, max_tokens=64))), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    _wait(client, b.id, until=("in_progress",))
    c = client.batches.cancel(b.id)
    assert c.status in ("cancelling", "cancelled")
    done, _ = _wait(client, b.id)
    assert done.status == "cancelled" and done.cancelled_at
    assert done.request_counts.completed < 40
    if done.output_file_id:
        out = client.files.content(done.output_file_id).text.splitlines()
        assert len(out) == done.request_counts.completed


def test_batch_api_bad_input_is_openais_error_shape(serve, client):
    r = httpx.post(serve.base + "/v1/batches", timeout=10,
                   json={"input_file_id": "file-nope", "endpoint": "/v1/chat/completions",
                         "completion_window": "24h"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "input_file_id"
    f = client.files.create(file=("x.jsonl", io.BytesIO(_jsonl(1))), purpose="batch")
    r = httpx.post(serve.base + "/v1/batches", timeout=10,
                   json={"input_file_id": f.id, "endpoint": "/v1/moderations", "completion_window": "24h"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "endpoint"
    assert "/v1/embeddings" in r.json()["error"]["message"], "the refusal names what is served"
    r = httpx.post(serve.base + "/v1/files", timeout=10, files={"file": ("a.jsonl", b"x")},
                   data={"purpose": "fine-tune"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "purpose"
    assert httpx.get(serve.base + "/v1/batches/batch_nope", timeout=10).status_code == 404


def test_a_server_killed_mid_batch_finishes_it_after_a_restart_each_result_once(model_path):
    from openai import OpenAI

    home = tempfile.mkdtemp(prefix="llamadesk-serve-kill-")
    srv = start_serve(model_path, home, "--parallel", "2")
    port = srv.port
    try:
        c = OpenAI(base_url=srv.base + "/v1", api_key="x", max_retries=0)
        f = c.files.create(file=("in.jsonl", io.BytesIO(_jsonl(12, max_tokens=24))), purpose="batch")
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        deadline = time.monotonic() + 120
        while c.batches.retrieve(b.id).request_counts.completed < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(10)
    finally:
        srv.stop()
    srv2 = start_serve(model_path, home, "--parallel", "2", port=port)
    try:
        c2 = OpenAI(base_url=srv2.base + "/v1", api_key="x", max_retries=0)
        done, _ = _wait(c2, b.id)
        assert done.status == "completed" and done.request_counts.completed == 12
        ids = [json.loads(s)["custom_id"] for s in c2.files.content(done.output_file_id).text.splitlines()]
        assert sorted(ids) == sorted(f"req-{i}" for i in range(12))  # every one, exactly once
    finally:
        srv2.stop()


def test_an_answer_holding_a_unicode_line_separator_stays_one_record(client):
    # The journal writes U+2028 and U+0085 raw (JSON allows them); splitting it at them cut a record.
    lines = [json.dumps({"custom_id": f"req\u2028{i}\x85", "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": MODEL_ID, "max_tokens": 2, "temperature": 0,
                                  "messages": [{"role": "user", "content": "Hi"}]}}, ensure_ascii=False)
             for i in range(2)]
    f = client.files.create(file=("u.jsonl", io.BytesIO(("\n".join(lines) + "\n").encode())), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    done, _ = _wait(client, b.id)
    assert done.status == "completed", done.errors
    out = client.files.content(done.output_file_id).text.split("\n")
    assert sorted(json.loads(s)["custom_id"] for s in out if s) == ["req\u20280\x85", "req\u20281\x85"]


def test_a_batch_file_is_read_as_the_batch_api_specifies_every_other_line_an_error_record(serve):
    from tests.serve.harness import request_line, run_batch

    no_method = json.loads(request_line("no-method"))
    del no_method["method"]
    extra = {**json.loads(request_line("extra")), "priority": "high"}
    lines = ["# requests for the colour survey", request_line("r1"), request_line("other", model="gpt-4o"),
             json.dumps(extra), json.dumps(no_method), '"Name a river."', request_line("r2")]
    b, out, err = run_batch(serve.base, ("\n".join(lines) + "\n").encode())
    assert b["status"] == "completed"
    assert sorted(o["custom_id"] for o in out) == ["r1", "r2"]  # answered under their own ids
    counts = b["request_counts"]
    assert (counts["total"], counts["completed"], counts["failed"]) == (7, 2, 5)
    by_id = {e["custom_id"]: e["error"]["message"] for e in err}
    assert "'gpt-4o' does not exist" in by_id["other"] and MODEL_ID in by_id["other"]
    assert "unknown field 'priority'" in by_id["extra"] and "missing method" in by_id["no-method"]
    assert sum(m.startswith("line 1: malformed JSON") for m in by_id.values()) == 1  # the comment
    assert sum(m.startswith("line 6: expected a JSON object") for m in by_id.values()) == 1


def test_a_csv_file_answers_no_row_as_a_prompt(serve):
    from tests.serve.harness import run_batch

    csv = b"custom_id,prompt\nq1,Name a river\nq2,Name a mountain\n"
    b, out, err = run_batch(serve.base, csv, "questions.csv")
    assert b["status"] == "completed" and out == [] and b["output_file_id"] is None
    assert len(err) == 3 and all("malformed JSON" in e["error"]["message"] for e in err)


def test_a_line_for_another_endpoint_fails_the_batch_in_validation_as_openai_does(client):
    # OpenAI: status "failed", each such line in errors (code invalid_url, param url, its line);
    # nothing runs, so no line is ever answered as a request to an endpoint it did not name.
    chat = _jsonl(2).decode().splitlines()
    emb = json.dumps({"custom_id": "e1", "method": "POST", "url": "/v1/embeddings",
                      "body": {"model": MODEL_ID, "input": "A river."}})
    for endpoint, lines, wrong in (("/v1/embeddings", chat, [1, 2]),
                                   ("/v1/chat/completions", [chat[0], emb], [2])):
        f = client.files.create(file=("in.jsonl", io.BytesIO(("\n".join(lines) + "\n").encode())),
                                purpose="batch")
        b = client.batches.create(input_file_id=f.id, endpoint=endpoint, completion_window="24h")
        done, _ = _wait(client, b.id)
        assert done.status == "failed" and done.failed_at and done.in_progress_at is None
        assert done.output_file_id is None and done.error_file_id is None
        assert (done.request_counts.total, done.request_counts.completed) == (0, 0)
        errs = done.errors.data
        assert [(e.code, e.param, e.line) for e in errs] == [("invalid_url", "url", n) for n in wrong]
        for e in errs:
            assert f"is not this batch's endpoint {endpoint}" in e.message and "\n" not in e.message


def test_an_uploads_filename_is_kept_whole_or_refused_naming_its_control_character(serve, client):
    """httpx (the openai client's transport) escapes a line break in a filename as %0D%0A, and
    that name is kept exactly; a raw client's bare line feed is refused, not stored cut."""
    f = client.files.create(file=("a\r\nb.jsonl", io.BytesIO(_jsonl(1))), purpose="batch")
    assert client.files.retrieve(f.id).filename == "a%0D%0Ab.jsonl"
    body = (b'--XX\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            b'--XX\r\nContent-Disposition: form-data; name="file"; filename="a\nb.jsonl"\r\n'
            b"Content-Type: application/jsonl\r\n\r\n" + _jsonl(1) + b"\r\n--XX--\r\n")
    r = httpx.post(serve.base + "/v1/files", content=body, timeout=10,
                   headers={"Content-Type": "multipart/form-data; boundary=XX"})
    err = r.json()["error"]
    assert r.status_code == 400 and err["param"] == "file" and "U+000A" in err["message"]
    assert all("\n" not in x.filename for x in client.files.list())
