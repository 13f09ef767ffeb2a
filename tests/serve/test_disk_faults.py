"""Bad luck with the disk and the port, for real: a data folder that stops taking writes under a
running batch (RLIMIT_FSIZE set on the live server, so every file it writes past that size fails
as on a full disk, and raised again as space coming back), a read-only data folder after a
`kill -9` (a read-only bind mount in a mount namespace of the server's own: the server starts,
chat works, the batch says why it cannot go on, and resumes once the folder is writable), a
damaged or foreign database, a data folder that cannot be made, a port in use. Each ends in one
line, or in a failed batch that says why while the server goes on serving. And the one failure
that is not bad luck: the store's own SQL refused (a bug of ours) is a 500 saying so, not a 503
blaming the disk."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import time

import httpx
import openai
import pytest

from app.serve.batch_api_store import SCHEMA
from tests.remote.servers import Process, free_port
from tests.serve.conftest import MODEL_ID, openai_client
from tests.serve.harness import (
    create_batch,
    error,
    log_text,
    records,
    request_line,
    run_batch,
    serve_args,
    serve_env,
    start,
    upload,
    wait_batch,
)

CHAT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def _serve_dir(home) -> str:
    return str(home / "xdg_data_home" / "llamadesk" / "serve")


def test_a_full_data_folder_fails_the_batch_while_chat_goes_on_and_space_coming_back_recovers(
        model_path, tmp_path):
    srv = start(model_path, tmp_path, "--parallel", "2")
    try:
        lines = "\n".join(request_line(f"r{i}", content=f"Name thing number {i}.") for i in range(60))
        b = create_batch(srv.base, upload(srv.base, lines.encode())["id"])
        while _counts(srv.base, b["id"])["completed"] < 3:
            time.sleep(0.05)
        journal = f"{_serve_dir(tmp_path)}/journals/{b['id']}.jsonl"
        # From now on no file of the server's grows past the journal's size: the journal, the
        # database's WAL and the log all fail their next write, as on a disk that is full.
        resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE,
                         (os.path.getsize(journal) + 16, resource.RLIM_INFINITY))
        failed = wait_batch(srv.base, b["id"], timeout=60)
        assert failed["status"] == "failed", failed
        err = failed["errors"]["data"][0]
        assert err["code"] == "write_failed" and "File too large" in err["message"]
        assert failed["request_counts"]["completed"] < 60  # it stopped; the rest was cancelled
        chat = httpx.post(srv.base + "/v1/chat/completions", json=CHAT, timeout=30)
        assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] is not None
        refused = httpx.post(srv.base + "/v1/files", files={"file": ("b.jsonl", lines.encode() * 4)},
                             data={"purpose": "batch"}, timeout=30)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "storage_unavailable"
        # Space comes back: the failure is on record, and the next batch runs to its end.
        unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE, unlimited)
        again, out, _ = run_batch(srv.base, (request_line("after") + "\n").encode())
        assert again["status"] == "completed" and [o["custom_id"] for o in out] == ["after"]
        deadline = time.monotonic() + 15
        while (row := _stored(tmp_path, b["id"]))[0] != "failed" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert row[0] == "failed" and "write_failed" in row[1]
    finally:
        srv.stop()
    assert "Traceback" not in srv.tail()


def _counts(base: str, bid: str) -> dict:
    return httpx.get(base + f"/v1/batches/{bid}", timeout=10).json()["request_counts"]


def _stored(home, bid: str) -> tuple:
    """A batch's status and errors as the server's database holds them (not the API's view)."""
    with sqlite3.connect(f"{_serve_dir(home)}/serve.db") as db:
        return db.execute("SELECT status, errors FROM batches WHERE id=?", (bid,)).fetchone()


def _one_line(r: subprocess.CompletedProcess, *says: str) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("llamadesk: error: ") and "Traceback" not in r.stderr
    for s in says:
        assert s in lines[0], lines[0]
    return lines[0]


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def _read_only(data, args: list[str]):
    """The command that runs `args` on `data` made read-only, and what its writes fail with: a
    read-only bind mount seen by the server alone (root ignores file modes), else the folder's
    write bits taken away (restored after)."""
    if _unshare_works():
        ro = f'mount --bind "{data}" "{data}" && mount -o remount,bind,ro "{data}" && exec "$@"'
        yield (["unshare", "-m", "--propagation", "private", "sh", "-c", ro, "sh", *args],
               "Read-only file system")
        return
    if os.geteuid() == 0:
        pytest.skip("root, with no mount namespace to make a folder read-only in")
    modes = {p: p.stat().st_mode for p in [data, *data.rglob("*")]}
    for p, mode in modes.items():
        p.chmod(mode & ~0o222)
    try:
        yield args, "Permission denied"
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_batch_on_a_read_only_data_folder_after_kill_9_says_why_and_chat_goes_on(model_path, tmp_path):
    srv = start(model_path, tmp_path, "--parallel", "1")
    try:
        lines = [request_line(f"r{i}", content=f"Name thing number {i}.", max_tokens=32) for i in range(4)]
        f = upload(srv.base, "\n".join(lines).encode())
        b = create_batch(srv.base, f["id"])
        while _counts(srv.base, b["id"])["completed"] < 1:  # killed mid-batch, as it runs
            time.sleep(0.05)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(10)
    finally:
        srv.stop()
    port = free_port()
    with _read_only(tmp_path / "xdg_data_home", serve_args(model_path, port)) as (cmd, says):
        ro = Process(cmd, port, "/health", serve_env(tmp_path))
        try:
            with openai_client(ro) as client:
                chat = client.chat.completions.create(**CHAT)
                assert chat.choices[0].message.content is not None
                got = client.batches.retrieve(b["id"])
                assert got.status == "failed" and got.failed_at and len(got.errors.data) == 1
                err = got.errors.data[0]
                assert err.code == "storage_unavailable" and "\n" not in err.message
                for part in (_serve_dir(tmp_path), "cannot be written", says, "resumes"):
                    assert part in err.message, err.message
                assert got.request_counts.completed >= 1  # what it had done is still there
                assert b["id"] in [x.id for x in client.batches.list()]
                assert client.files.content(f["id"]).text.startswith(lines[0])
                with pytest.raises(openai.InternalServerError) as refused:  # 503, naming the folder
                    client.files.create(file=("more.jsonl", io.BytesIO(lines[0].encode())), purpose="batch")
                assert refused.value.status_code == 503 and says in str(refused.value)
        finally:
            ro.stop()
        assert "Traceback" not in ro.tail()
    # Writable again: the batch resumes where it was and ends with every line answered once.
    srv = start(model_path, tmp_path, "--parallel", "4", port=port)
    try:
        done = wait_batch(srv.base, b["id"])
        assert done["status"] == "completed" and done["request_counts"]["completed"] == 4, done
        assert sorted(o["custom_id"] for o in records(srv.base, done["output_file_id"])) == \
            [f"r{i}" for i in range(4)]
    finally:
        srv.stop()


@pytest.mark.parametrize("damage, says", [
    (lambda db: db.write_bytes(b"this is not a database" * 200), "not a usable server database"),
    (lambda db: sqlite3.connect(db).execute("CREATE TABLE batches (id TEXT)").connection.commit(),
     "its batches table lacks"),
])
def test_a_damaged_or_foreign_database_is_one_line_before_the_model_loads(model_path, tmp_path, damage, says):
    db = tmp_path / "xdg_data_home" / "llamadesk" / "serve" / "serve.db"
    db.parent.mkdir(parents=True)
    damage(db)
    r = subprocess.run(serve_args(model_path, free_port()), capture_output=True, text=True, timeout=60,
                       env=serve_env(tmp_path))
    _one_line(r, str(db), says, "move it aside")
    assert "llama_" not in log_text(tmp_path)  # it never got as far as loading the model


def test_a_data_folder_that_cannot_be_made_is_one_line(model_path, tmp_path):
    (tmp_path / "xdg_data_home").write_text("a file where the data folder would be")
    r = subprocess.run(serve_args(model_path, free_port()), capture_output=True, text=True, timeout=60,
                       env=serve_env(tmp_path))
    _one_line(r, "data folder", "Not a directory")


def test_a_port_in_use_is_found_before_the_model_loads(model_path, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run(serve_args(model_path, port), capture_output=True, text=True, timeout=60,
                           env=serve_env(tmp_path))
    _one_line(r, f"127.0.0.1:{port}", "Address already in use", "--port")
    assert "llama_" not in log_text(tmp_path)  # found before the model was loaded, not after


def test_sql_the_store_did_not_expect_is_a_500_naming_the_bug_and_the_server_goes_on(model_path, tmp_path):
    folder = tmp_path / "xdg_data_home" / "llamadesk" / "serve"
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "serve.db") as db:
        db.executescript(SCHEMA)
        # A rule the store's code does not expect: every file's record now fails its constraint.
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON files BEGIN SELECT RAISE(ABORT, 'no'); END")
    srv = start(model_path, tmp_path)
    try:
        r = httpx.post(srv.base + "/v1/files", files={"file": ("in.jsonl", request_line("a").encode())},
                       data={"purpose": "batch"}, timeout=30)
        err = error(r, 500)
        assert err["type"] == "server_error" and err["code"] == "internal_error", err
        assert "LlamaDesk bug" in err["message"] and "SQLITE_CONSTRAINT" in err["message"], err
        assert "could not record the file" in err["message"] and "\n" not in err["message"]
        assert not any((folder / "files").iterdir()), "the refused upload left no file behind"
        listing = httpx.get(srv.base + "/v1/files", timeout=30)  # the server goes on
        assert listing.status_code == 200 and listing.json()["data"] == []
        chat = httpx.post(srv.base + "/v1/chat/completions", json=CHAT, timeout=30)
        assert chat.status_code == 200
    finally:
        srv.stop()
    log = log_text(tmp_path)
    assert "bug in the server's batch store (SQLITE_CONSTRAINT" in log
    assert "Traceback" in log, "the traceback a fix needs is in the server's log"
    assert "Exception in ASGI application" not in srv.tail(), "answered by the store's handler"
