"""`llamadesk ask` on every kind of bad model file: one line naming the file and the reason, exit 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from app.engine import backend
from tests.gguf_factory import BAD_MODEL_CASES as CASES
from tests.gguf_factory import make_bad_model as _make


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
            import io

            from app.cli import main

            # The same path as root first (a missing file fails where an unreadable one
            # does), so every module is imported while Python's own files are readable.
            sys.stderr = io.StringIO()
            main(["ask", "hello", "--model", str(tmp_path / "absent.gguf"), "--max-tokens", "2",
                  "--no-save"])
            sys.stderr = os.fdopen(write_fd, "w")  # pytest has replaced the real stderr
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            rc = main(["ask", "hello", "--model", str(p), "--max-tokens", "2", "--no-save"])
            sys.stderr.flush()
            os._exit(rc)
        except BaseException as e:  # noqa: BLE001 - say what went wrong: the parent only sees the exit code
            os.write(write_fd, f"child failed: {type(e).__name__}: {e}\n".encode())
            os._exit(99)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        stderr = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, stderr
    expected = f"llamadesk: error: {p}: permission denied: the file is not readable"
    assert stderr.strip().splitlines() == [expected]


def _address_space_limit():
    """A real memory limit for the child, so the allocation fails on any machine,
    however much memory it has; the model and its small buffers fit well inside."""
    import resource

    limit = 8 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.skipif(backend.gpu_offload_supported(),
                    reason="a GPU runtime reserves more address space than the limit allows")
def test_a_context_too_big_for_memory_names_the_kv_cache(model_path, isolated_dirs):
    """llama.cpp warns that 10M tokens exceed the training context, then fails to
    allocate 30 GB for the cache: the error is the line to show, not the warning."""
    r = subprocess.run([sys.executable, "-m", "app", "ask", "hi", "--ctx", "10000000", "--model",
                        str(model_path), "--threads", "1", "--max-tokens", "2"],
                       capture_output=True, text=True, timeout=120, preexec_fn=_address_space_limit)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"llamadesk: error: {model_path}: llama.cpp could not load it: failed to allocate 30.7 GB for the "
        "KV cache of a 10,000,000-token context; lower the context length (--ctx, or Context length in "
        "Settings)"]
    listed = subprocess.run([sys.executable, "-m", "app", "list", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert listed.stdout.strip() == "[]"  # the history was opened, but no turn was started
