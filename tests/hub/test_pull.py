"""`llamadesk pull` against the local Hub: the whole way, and every fault the issue names, for real
(a kill -9 of the real child, the mirror cutting its connection, a flipped byte, a full disk)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from app.hub import library
from app.hub.journal import Ranges
from app.paths import user_models_dir
from tests.hub.conftest import GATED, GEMMA, TINY, cli, spawn
from tests.hub.helpers import byte_ranges, journal_ranges, landed, models_tree, settled, sha256, wait_for
from tests.hub.mirror import GOOD_TOKEN


def _one_line(r, code=2):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    [line] = [ln for ln in lines if "error" in ln]  # after the file and fit lines a pull prints first
    assert line == lines[-1] and line.startswith("llamadesk: error: ")
    return line.removeprefix("llamadesk: error: ")


def _listed() -> list[str]:
    r = cli("models", "--json")
    assert r.returncode == 0, r.stderr
    return [m["file"] for m in json.loads(r.stdout)]


def test_pull_default_quant_in_parts_verified_listed_and_deleted(hub):
    f = hub.repos[GEMMA].file("gemma-3-270m-Q4_K_M.gguf")
    r = cli("pull", GEMMA)
    assert r.returncode == 0, r.stderr
    path = user_models_dir() / "huggingface" / "models--llamadesk-test--gemma-3-270m-GGUF" / "snapshots" \
        / hub.repos[GEMMA].commit / f.name
    assert r.stdout.strip() == str(path) and sha256(path) == f.sha256
    assert "fits" in r.stderr and "sha256 verified" in r.stderr
    transfer = [s for s in hub.served("/cdn/") if s.sent > 8 << 20]
    assert len(transfer) == 4 and all(s.status == 206 for s in transfer)  # four ranged parts
    assert sum(s.sent for s in transfer) == f.size  # each byte once
    header = [s for s in hub.served("/cdn/") if s not in transfer]
    assert sum(s.sent for s in header) < 16 << 20  # the fit read the header, not the file
    assert (library.repo_dir(GEMMA) / "refs" / "main").read_text() == hub.repos[GEMMA].commit
    assert f.name in _listed()

    hub.reset()
    again = cli("pull", f"{GEMMA}:Q4_K_M")
    assert again.returncode == 0 and "already downloaded" in again.stderr
    assert not hub.served("/cdn/")

    gone = cli("models", "delete", f"{GEMMA}:Q4_K_M")
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.splitlines()[-1] == "253.1 MB freed"
    assert f.name not in _listed() and not library.repo_dir(GEMMA).exists()


def test_kill_9_mid_file_resumes_at_the_journaled_byte(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    hub.gate_after = 10 << 20  # every response stalls once 10 MB have gone out
    child = spawn("pull", f"{TINY}:Q4_K_M", "--parts", "4")
    try:
        wait_for(lambda: hub.sent() > 10 << 20, what="10 MB served")
        settled(TINY, f.sha256)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    held = journal_ranges(TINY, f.sha256)
    assert 0 < held.total() < f.size
    assert all(".gguf" not in p for p in models_tree())  # the partial is no model
    assert f.name not in _listed()
    table = cli("models")
    assert f"{TINY}:{f.name}" in table.stdout and "partial downloads (1)" in table.stdout

    hub.reset()
    r = cli("pull", f"{TINY}:Q4_K_M", "--parts", "4")
    assert r.returncode == 0, r.stderr
    assert "resuming:" in r.stderr and sha256(user_models_dir().joinpath(r.stdout.strip())) == f.sha256
    cdn = hub.served("/cdn/")
    assert cdn[0].range == "bytes=0-1048575"  # the fit's header read
    fetched = Ranges(byte_ranges(cdn[1:]))
    assert fetched.pairs() == Ranges(held.gaps(f.size)).pairs()  # exactly the missing bytes...
    assert sum(s.sent for s in cdn[1:]) == f.size - held.total()  # ...each once
    assert not list(library.repo_dir(TINY).glob("blobs/*"))


def test_a_dropped_connection_resumes_from_the_byte_it_stopped_at(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    hub.drop_after, hub.drop_times = 3_000_000, 3  # the header read is the first response
    r = cli("pull", f"{TINY}:Q4_K_M", "--parts", "1")
    assert r.returncode == 0, r.stderr
    assert sha256(user_models_dir().joinpath(r.stdout.strip())) == f.sha256
    body = hub.served("/cdn/")[1:]
    assert [s.sent for s in body[:2]] == [3_000_000, 3_000_000]  # cut twice mid-body
    assert [s.start for s in body] == [0, 3_000_000, 6_000_000]
    assert sum(s.sent for s in body) == f.size


def test_a_flipped_byte_is_rejected_never_listed_and_fetched_again(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    hub.corrupt_at, hub.corrupt_times = 5_000_000, 1
    r = cli("pull", f"{TINY}:Q4_K_M")
    assert r.returncode == 0, r.stderr
    assert "failed its sha256 check and was fetched again" in r.stderr
    assert sha256(user_models_dir().joinpath(r.stdout.strip())) == f.sha256

    hub.reset()
    hub.corrupt_at, hub.corrupt_times = 5_000_000, 99  # always
    line = _one_line(cli("pull", f"{TINY}:Q2_K"), 1)
    assert line.startswith(f"{TINY}/tiny-Q2_K.gguf: the file arrived damaged twice")
    assert line.endswith("nothing was kept")
    assert "tiny-Q2_K.gguf" not in _listed()
    assert not [p for p in models_tree() if "Q2_K" in p or p.endswith(".incomplete")]


def test_a_server_that_ignores_ranges_gets_one_stream(hub):
    f = hub.repos[TINY].file("tiny-Q2_K.gguf")
    hub.no_ranges = True
    r = cli("pull", f"{TINY}:Q2_K", "--parts", "4")
    assert r.returncode == 0, r.stderr
    assert sha256(user_models_dir().joinpath(r.stdout.strip())) == f.sha256
    assert all(s.status == 200 for s in hub.served("/cdn/"))


def test_missing_things_and_gated_repositories_are_one_line(hub):
    assert _one_line(cli("pull", "nobody/nothing-GGUF")) == \
        f"nobody/nothing-GGUF: no such repository on {hub.url} (if it is private, set HF_TOKEN)"
    assert _one_line(cli("pull", TINY, "--revision", "v9")) == f"{TINY}: no revision 'v9'"
    assert _one_line(cli("pull", f"{TINY}:Q9_K")) == \
        f"{TINY}: no file or quantization 'Q9_K' here (it has: Q2_K, Q4_K_M)"
    assert _one_line(cli("pull", "not a repo")).startswith("'not a repo' is not a repository")
    licence = f"accept the licence at {hub.url}/{GATED}"
    assert _one_line(cli("pull", GATED)) == f"{GATED} is gated and no token given (set HF_TOKEN): {licence}"
    wrong = dict(os.environ, HF_TOKEN="hf_wrong")
    assert _one_line(cli("pull", GATED, env=wrong)) == \
        f"{GATED} is gated and your token has no access to it: {licence}"
    assert not models_tree()

    hub.reset()
    ok = cli("pull", GATED, env=dict(os.environ, HF_TOKEN=GOOD_TOKEN))
    assert ok.returncode == 0, ok.stderr
    resolve = hub.served("/resolve/") + hub.served("/resolve/", "HEAD")
    assert resolve and all(s.authorization for s in resolve)
    cdn = hub.served("/cdn/")
    assert cdn and not any(s.authorization for s in cdn)  # the token never goes to the CDN


def test_ctrl_c_pauses_keeps_the_partial_and_cancel_removes_it(hub):
    f = hub.repos[TINY].file("tiny-Q4_K_M.gguf")
    hub.gate_after = 8 << 20  # after 8 MB every response waits at the gate until the child is gone
    child = spawn("pull", f"{TINY}:Q4_K_M")
    try:
        wait_for(hub.held.is_set, what="the transfer held at the gate after 8 MB")
        wait_for(lambda: landed(TINY, f.sha256) > 0, what="the first bytes on disk")
        settled(TINY, f.sha256)
        child.send_signal(signal.SIGINT)  # mid-transfer: the rest cannot arrive while the gate is shut
        _out, err = child.communicate(timeout=30)
    finally:
        hub.gate.set()  # only now, so no byte past the gate can race the Ctrl+C
        child.kill()
    assert child.returncode == 130, err
    [line] = err.strip().splitlines()[-1:]
    assert line.startswith("llamadesk: paused: ") and " of 25.6 MB kept; resume with " \
        f"`llamadesk pull {TINY}:Q4_K_M`, or remove it with `llamadesk pull {TINY}:Q4_K_M --cancel`" in line
    assert 0 < journal_ranges(TINY, f.sha256).total() < f.size
    r = cli("pull", f"{TINY}:Q4_K_M", "--cancel")
    assert r.returncode == 0 and r.stdout.startswith(f"removed the partial {TINY}/{f.name} (25.6 MB freed)")
    assert not models_tree()
    assert _one_line(cli("pull", f"{TINY}:Q4_K_M", "--cancel")) == \
        f"no partial download of {TINY}:Q4_K_M to cancel"


def test_a_file_size_limit_is_one_line_and_leaves_nothing(hub):
    """RLIMIT_FSIZE: a full disk in any container (the partial's allocation fails with EFBIG)."""
    r = cli("pull", f"{TINY}:Q4_K_M",
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (10_000_000, 10_000_000)))
    assert _one_line(r) == (f"{TINY}/tiny-Q4_K_M.gguf: file too large for this file system or limit "
                            "(needs 25.6 MB); nothing was downloaded")
    assert not models_tree()


def test_a_disk_too_small_is_refused_before_the_first_byte(hub, tmp_path):
    """A real 60 MB tmpfs in the child's own mount namespace, where this container allows one."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    data = tmp_path / "small"
    data.mkdir()
    script = ('mount -t tmpfs -o size=60m tmpfs "$1" || exit 99; "$2" -m app pull "$3"; rc=$?; '
              'find "$1" -type f; exit $rc')
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(data), sys.executable, GEMMA],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, XDG_DATA_HOME=str(data)))
    if r.returncode == 99 or r.stderr.startswith("unshare:"):
        pytest.skip(f"this container refuses a tmpfs mount: {r.stderr.strip()}")
    line = _one_line(r)
    assert line.startswith(f"{GEMMA}/gemma-3-270m-Q4_K_M.gguf needs 253.1 MB and ")
    assert line.endswith(" MB free; nothing was downloaded")
    assert r.stdout == ""  # nothing left in the models folder
    assert sum(s.sent for s in hub.served("/cdn/")) < 16 << 20  # only the header was read
