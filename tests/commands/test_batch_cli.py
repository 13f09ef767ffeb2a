"""`llamadesk batch` as a user runs it: killed mid-run and resumed, Ctrl+C, progress, summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from app.batch_jsonl.requests import BatchInputError, read_input
from app.cli import main
from app.engine.sampling import GenerationSettings

DEFAULTS = GenerationSettings(max_tokens=8)
PROMPTS = [f"Write one sentence about the number {i}." for i in range(10)]


def _as_at_a_terminal() -> None:
    """Ctrl+C as a terminal delivers it: a test run started in the background (`cmd &`, nohup)
    passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(model_path, inp, out, max_tokens=24):
    return subprocess.Popen(
        [sys.executable, "-m", "app", "batch", str(inp), "-o", str(out), "--model", str(model_path),
         "--parallel", "2", "--max-tokens", str(max_tokens), "--temperature", "0", "--ctx", "256"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ},
        preexec_fn=_as_at_a_terminal)


def _wait_lines(out, n, proc, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if out.exists() and out.read_text().count("\n") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("no results in time")


def _interrupted(model_path, tmp_path, after: int, sig):
    """A real `llamadesk batch` over PROMPTS, sent `sig` once `after` results are written."""
    inp, out = tmp_path / "prompts.txt", tmp_path / "out.jsonl"
    inp.write_text("\n".join(PROMPTS) + "\n")
    p = _start(model_path, inp, out)
    _wait_lines(out, after, p)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    return inp, out, p, err


def _ids(out):
    return [json.loads(line)["custom_id"] for line in out.read_text().splitlines()]


@pytest.mark.slow
def test_killed_run_resumes_and_every_request_is_answered_exactly_once(model_path, tmp_path):
    inp, out, p, _ = _interrupted(model_path, tmp_path, 2, signal.SIGKILL)
    assert p.returncode == -signal.SIGKILL
    first = _ids(out)
    assert 2 <= len(first) < len(PROMPTS)
    p2 = _start(model_path, inp, out)
    _, err = p2.communicate(timeout=300)
    assert p2.returncode == 0, err
    ids = _ids(out)
    assert sorted(ids) == sorted(it.custom_id for it in read_input(inp, DEFAULTS))  # each exactly once
    assert ids[:len(first)] == first  # finished work was kept, not redone
    assert f"{len(first)} skipped" in err and "batch: " in err


def test_ctrl_c_stops_cleanly_keeping_finished_results(model_path, tmp_path):
    _, out, p, err = _interrupted(model_path, tmp_path, 1, signal.SIGINT)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "run the same command to resume" in err
    recs = [json.loads(line) for line in out.read_text().splitlines()]  # every line is whole
    assert recs and all(r["response"]["status_code"] == 200 for r in recs)
    assert len(recs) < len(PROMPTS)


@pytest.mark.parametrize("content", [None, b"", b"\n \n", b"\xff\xfe bad"])
def test_empty_missing_or_unreadable_input_is_one_line_exit_2(tmp_path, capsys, content):
    f = tmp_path / "in.jsonl"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(BatchInputError):
        read_input(f, DEFAULTS)
    assert main(["batch", str(f), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llamadesk: error:") and "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists()


def _req(cid, content, **body):
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"messages": [{"role": "user", "content": content}], **body}})


def _records(out):
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_user_id_line_2_beside_a_malformed_line_2_survives_a_kill(model_path, tmp_path):
    """The hostile report: the malformed line 2 was journaled as "line-2", the user's
    request "line-2" then counted as done and never ran, run after run."""
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [_req("line-1", "Name a fruit."), '{"custom_id": "broken", "body": ',
             _req("line-2", "Name a city."), _req("line-3", "Name a colour."),
             _req("line-2", "a repeated id"), _req("line-4", "Name a tree.")]
    inp.write_text("\n".join(lines) + "\n")
    p = _start(model_path, inp, out, max_tokens=4)
    _wait_lines(out, 1, p)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    p2 = _start(model_path, inp, out, max_tokens=4)
    _, err = p2.communicate(timeout=300)
    assert p2.returncode == 0 and "Traceback" not in err, err
    recs = _records(out)
    answered = sorted(r["custom_id"] for r in recs if r["error"] is None)
    assert answered == ["line-1", "line-2", "line-3", "line-4"]  # every valid request, exactly once
    errors = [r for r in recs if r["error"] is not None]
    by_line = {r["llamadesk"]["line"]: r for r in errors}
    assert sorted(by_line) == [2, 5] and len(errors) == 2  # each bad line exactly once
    assert by_line[2]["error"]["message"].startswith("line 2: malformed JSON")
    assert "duplicate custom_id 'line-2'" in by_line[5]["error"]["message"]
    assert len({r["custom_id"] for r in recs}) == len(recs) == 6
    p3 = _start(model_path, inp, out, max_tokens=4)
    _, err = p3.communicate(timeout=120)
    assert p3.returncode == 0 and "all 6 requests are already in" in err and len(_records(out)) == 6


def test_bad_numbers_are_error_records_and_the_rest_is_answered(model_path, tmp_path):
    """`"max_tokens": Infinity` and company once stopped the whole batch with a traceback."""
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    hi = '"messages": [{"role": "user", "content": "Hi."}]'
    bad = {"inf": '"max_tokens": Infinity', "e400": '"max_tokens": 1e400', "e30": '"max_tokens": 1e30',
           "seed": '"seed": 1e400', "topk": '"top_k": true', "nan": '"temperature": NaN'}
    lines = [_req("first", "Name a fruit.", max_tokens=3)]
    head = '"method": "POST", "url": "/v1/chat/completions"'
    lines += [f'{{"custom_id": "{cid}", {head}, "body": {{{field}, {hi}}}}}' for cid, field in bad.items()]
    lines.append(_req("last", "Name a city.", max_tokens=3))
    inp.write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, "-m", "app", "batch", str(inp), "-o", str(out), "--model",
                        str(model_path), "--parallel", "2", "--ctx", "256", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    recs = {rec["custom_id"]: rec for rec in _records(out)}
    assert recs["first"]["error"] is None and recs["last"]["error"] is None
    for cid, field in bad.items():
        name = field.split('"')[1]
        msg = recs[cid]["error"]["message"]
        assert msg.startswith(f"line {list(bad).index(cid) + 2}: {name} ") and "\n" not in msg, msg
