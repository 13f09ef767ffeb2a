"""`llamadesk batch` as a user runs it: killed mid-run and resumed, Ctrl+C, progress, summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from app.batchfile.requests import BatchInputError, read_input
from app.cli import main
from app.engine.sampling import GenerationSettings

DEFAULTS = GenerationSettings(max_tokens=8)
PROMPTS = [f"Write one sentence about the number {i}." for i in range(10)]


def _start(model_path, inp, out):
    return subprocess.Popen(
        [sys.executable, "-m", "app", "batch", str(inp), "-o", str(out), "--model", str(model_path),
         "--parallel", "2", "--max-tokens", "24", "--temperature", "0", "--ctx", "256"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})


def _wait_lines(out, n, proc, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if out.exists() and out.read_text().count("\n") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("no results in time")


def _ids(out):
    return [json.loads(line)["custom_id"] for line in out.read_text().splitlines()]


@pytest.mark.slow
def test_killed_run_resumes_and_every_request_is_answered_exactly_once(model_path, tmp_path):
    inp, out = tmp_path / "prompts.txt", tmp_path / "out.jsonl"
    inp.write_text("\n".join(PROMPTS) + "\n")
    p = _start(model_path, inp, out)
    _wait_lines(out, 2, p)
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    first = _ids(out)
    assert 2 <= len(first) < len(PROMPTS)
    p2 = _start(model_path, inp, out)
    _, err = p2.communicate(timeout=300)
    assert p2.returncode == 0, err
    ids = _ids(out)
    assert sorted(ids) == sorted(f"line-{i}" for i in range(1, 11))  # each exactly once
    assert ids[:len(first)] == first  # finished work was kept, not redone
    assert f"{len(first)} skipped" in err and "batch: " in err


def test_ctrl_c_stops_cleanly_keeping_finished_results(model_path, tmp_path):
    inp, out = tmp_path / "prompts.txt", tmp_path / "out.jsonl"
    inp.write_text("\n".join(PROMPTS) + "\n")
    p = _start(model_path, inp, out)
    _wait_lines(out, 1, p)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
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
