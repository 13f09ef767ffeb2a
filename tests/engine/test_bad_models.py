"""Every kind of bad model file gets one precise line, from the engine and the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from app.engine.errors import EngineError, ModelFileError, ModelLoadError
from app.engine.loader import load_model
from tests.gguf_factory import write_gguf


def _vocab_only(path):
    return write_gguf(path, {"general.architecture": "gemma3", "tokenizer.ggml.model": "llama",
                             "tokenizer.ggml.tokens": ["<pad>", "<eos>", "a", "b"]}, [])


def _unknown_arch(path):
    return write_gguf(path, {"general.architecture": "notamodel", "general.name": "x"},
                      [("token_embd.weight", (8, 4))])


def _make(kind, tmp_path, model_path):
    p = tmp_path / f"{kind}.gguf"
    if kind == "missing":
        return tmp_path / "nope.gguf"
    if kind == "directory":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "not_gguf":
        p.write_text("this is a text file, not a model\n")
    elif kind == "truncated":
        with open(model_path, "rb") as f:
            p.write_bytes(f.read(50_000_000))
    elif kind == "truncated_header":
        with open(model_path, "rb") as f:
            p.write_bytes(f.read(200))
    elif kind == "no_tensors":
        _vocab_only(p)
    elif kind == "unknown_arch":
        _unknown_arch(p)
    return p


CASES = {
    "missing": "no such file",
    "directory": "is a directory",
    "empty": "is empty",
    "not_gguf": "not a GGUF file",
    "truncated": "truncated GGUF",
    "truncated_header": "truncated GGUF",
    "no_tensors": "has no tensors",
    "unknown_arch": "unsupported model architecture 'notamodel'",
}


@pytest.mark.parametrize("kind", list(CASES))
def test_engine_raises_typed_error_naming_file_and_reason(kind, tmp_path, model_path):
    p = _make(kind, tmp_path, model_path)
    with pytest.raises(EngineError) as err:
        load_model(p)
    assert isinstance(err.value, (ModelFileError, ModelLoadError))
    msg = str(err.value)
    assert str(p.name) in msg and CASES[kind] in msg
    assert "\n" not in msg


def _run_cli(args, env=None, user=None):
    cmd = [sys.executable, "-m", "app", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("kind", list(CASES))
def test_cli_prints_one_line_and_exits_2(kind, tmp_path, model_path):
    p = _make(kind, tmp_path, model_path)
    r = _run_cli(["ask", "hello", "--model", str(p), "--max-tokens", "4"])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("llamadesk: error: ") and p.name in lines[0] and CASES[kind] in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_unreadable_file(tmp_path, model_path):
    """As root every file is readable, so the check drops privileges in a forked child."""
    p = tmp_path / "secret.gguf"
    shutil.copyfile(model_path, p)
    os.chmod(p, 0o000)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become an unprivileged user, then run the real CLI entry point
        try:
            sys.stderr = os.fdopen(write_fd, "w")  # pytest has replaced the real stderr
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            from app.cli import main

            rc = main(["ask", "hello", "--model", str(p), "--max-tokens", "2", "--no-save"])
            sys.stderr.flush()
            os._exit(rc)
        except BaseException:
            os._exit(99)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        stderr = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, stderr
    expected = f"llamadesk: error: {p}: permission denied: the file is not readable"
    assert stderr.strip().splitlines() == [expected]
