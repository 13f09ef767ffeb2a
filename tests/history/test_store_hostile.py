"""A healthy history that merely cannot be opened is never moved aside, and reading
it needs no writes: real fd limits, real permissions, real read-only and full
file systems, through the real `llamadesk` command in a child process.

Root bypasses file permissions, so where the test runs as root the child drops
to uid/gid 65534 before it starts; the XDG folders then live in a temporary
folder that user can reach (pytest's own is private to root). chattr and
mounting a tmpfs need root and a container that allows them; where either is
refused, the test that needs it says so and skips.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from app.history import migrations
from app.history.connection import MAX_ID
from app.history.errors import ConversationNotFound, StoreError, StoreVersionError
from app.history.store import DB_NAME, Store, default_path
from tests.store_rows import row_counts

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
ROOTED = os.geteuid() == 0
XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


@pytest.fixture
def reachable(monkeypatch):
    """XDG folders an unprivileged child can reach; the history folder is the child's own."""
    base = Path(tempfile.mkdtemp(prefix="llamadesk-hostile-"))
    os.chmod(base, 0o755)
    for var in XDG:
        d = base / var.lower()
        d.mkdir(mode=0o777)
        os.chmod(d, 0o777)
        monkeypatch.setenv(var, str(d))
    monkeypatch.setenv("HOME", str(base))
    data = default_path().parent
    if ROOTED:
        os.chown(data, NOBODY, NOBODY)
    yield data
    subprocess.run(["chattr", "-R", "-i", str(base)], capture_output=True)
    subprocess.run(["umount", str(data)], capture_output=True)
    for p in [base, *base.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)
    shutil.rmtree(base)


def seed(n: int = 2) -> list[int]:
    with Store.open() as s:
        ids = []
        for i in range(n):
            cid = s.create_conversation(system_prompt="sys")
            s.add_message(cid, "user", f"question {i}")
            s.add_message(cid, "assistant", f"answer {i}")
            ids.append(cid)
    return ids


def snapshot(folder: Path) -> dict[str, bytes]:
    """The database and anything beside it: nothing may be moved, renamed or rewritten."""
    db = folder / DB_NAME
    return {"db": db.read_bytes(), "names": sorted(p.name for p in folder.iterdir()
                                                   if ".unreadable-" in p.name or p.name == DB_NAME)}


def llamadesk(*args: str, nobody: bool = False, nofile: int | None = None,
              code: str | None = None) -> subprocess.CompletedProcess:
    """The real command (or `code`) in a child process, under a real limit or as nobody."""
    if nobody and ROOTED:
        return _forked_as_nobody(args, code)

    def limits():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "app", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limits)


def _forked_as_nobody(args, code) -> subprocess.CompletedProcess:
    """Fork, drop to nobody, run the CLI's entry point: an exec would need this
    Python's own folder to be readable by nobody, which it may not be."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            rc = 99
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
                from app.cli import build_parser, main

                build_parser()  # every module imported first: nobody cannot read this Python's files
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                if code:
                    sys.argv = ["-c", *args]
                    exec(compile(code, "<child>", "exec"), {"__name__": "__main__"})
                    rc = 0
                else:
                    rc = main(list(args))
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - printed for the parent, which reads the child's output
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, os.waitstatus_to_exitcode(status),
                                           out.read().decode(), err.read().decode())


def one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("llamadesk: error: ")]
    assert len(errors) == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return errors[0]


def listed_ok(r: subprocess.CompletedProcess, ids: list[int]) -> str:
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(c["id"] for c in json.loads(r.stdout)) == sorted(ids)
    return r.stderr


def try_root_tool(*cmd: str) -> None:
    if not ROOTED:
        pytest.skip(f"{cmd[0]} needs root")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"this container refuses `{' '.join(cmd[:2])}`: {r.stderr.strip()}")


# --- cannot open: left where it is, one line ------------------------------------

@pytest.mark.parametrize("args", [["list"], ["export", "1"], ["ask", "hi", "--model", "none.gguf"]])
def test_too_few_file_descriptors_leave_a_healthy_history_in_place(reachable, args):
    seed()
    before = snapshot(reachable)
    line = one_error(llamadesk(*args, nofile=7))
    assert "too many open files" in line and "ulimit -n" in line
    assert snapshot(reachable) == before
    assert [c["id"] for c in json.loads(llamadesk("list", "--json").stdout)] == [2, 1]


def test_unreadable_file_is_reported_and_left_in_place(reachable):
    seed()
    os.chmod(reachable / DB_NAME, 0o000)
    before = snapshot(reachable)
    for args in (["list"], ["export", "1"]):
        assert "permission denied: the file is not readable" in one_error(llamadesk(*args, nobody=True))
    assert snapshot(reachable) == before


def test_folder_that_cannot_be_entered_is_reported(reachable):
    seed()
    os.chmod(reachable, 0o000)
    assert "permission denied" in one_error(llamadesk("list", nobody=True))
    os.chmod(reachable, 0o755)
    assert len(list(reachable.glob("*.unreadable-*"))) == 0


def test_database_path_that_is_a_folder_is_not_moved(reachable):
    (reachable / DB_NAME).mkdir()
    (reachable / DB_NAME / "keep").write_text("precious")
    assert "it is a folder, not a database file" in one_error(llamadesk("list"))
    assert (reachable / DB_NAME / "keep").read_text() == "precious"
    assert not list(reachable.glob("*.unreadable-*"))


def test_history_folder_that_cannot_be_created(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker / "sub"))
    assert "cannot create the history folder" in one_error(llamadesk("list"))


# --- read-only: reading works, saving says why -----------------------------------

READ_ONLY_STORE = """
from app.history.errors import StoreError
from app.history.store import Store
with Store.open(writable=False) as s:
    assert s.read_only and "read-only" in s.notice, s.notice
    try:
        s.create_conversation()
    except StoreError as e:
        print(e)
"""


def assert_read_only_history(ids: list[int], folder: Path, why: str, nobody: bool = True) -> None:
    before = snapshot(folder)
    note = listed_ok(llamadesk("list", "--json", nobody=nobody), ids)
    assert "opened the history read-only" in note and why in note and len(note.splitlines()) == 1
    r = llamadesk("list", nobody=nobody)
    assert r.returncode == 0 and "question 1" in r.stdout, r.stderr
    r = llamadesk("export", str(ids[0]), nobody=nobody)
    assert r.returncode == 0 and "answer 0" in r.stdout, r.stderr
    line = one_error(llamadesk("ask", "hi", "--model", "none.gguf", nobody=nobody))
    assert "the history cannot be saved" in line and why in line
    r = llamadesk(code=READ_ONLY_STORE, nobody=nobody)
    assert r.returncode == 0 and "opened read-only; nothing can be saved" in r.stdout, r.stderr
    assert snapshot(folder) == before


def test_read_only_folder(reachable):
    ids = seed()
    os.chmod(reachable, 0o555)
    assert_read_only_history(ids, reachable, "is read-only")


def test_read_only_file_in_a_writable_folder(reachable):
    ids = seed()
    os.chmod(reachable / DB_NAME, 0o444)
    if ROOTED:
        os.chown(reachable / DB_NAME, 0, 0)  # not the child's: it cannot chmod it back
    assert_read_only_history(ids, reachable, "the file is read-only")


def test_immutable_folder_even_for_root(reachable):
    ids = seed()
    try_root_tool("chattr", "+i", str(reachable))
    assert_read_only_history(ids, reachable, "is read-only", nobody=False)


def on_tmpfs(folder, tmp_path, size: str) -> None:
    """Move the history folder's files onto a fresh tmpfs of `size` mounted over it."""
    keep = tmp_path / "copy"
    shutil.copytree(folder, keep)
    try_root_tool("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    shutil.copytree(keep, folder, dirs_exist_ok=True)


def test_read_only_mount(reachable, tmp_path):
    ids = seed()
    on_tmpfs(reachable, tmp_path, "4m")
    try_root_tool("mount", "-o", "remount,ro", str(reachable))
    assert_read_only_history(ids, reachable, "mounted read-only", nobody=False)


def test_full_disk_reads_but_does_not_save(reachable, tmp_path):
    ids = seed()
    on_tmpfs(reachable, tmp_path, "1m")
    with open(reachable / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    assert_read_only_history(ids, reachable, "is full", nobody=False)


def test_damaged_file_in_a_read_only_folder_is_left_as_it_is(reachable):
    (reachable / DB_NAME).write_bytes(b"not sqlite at all " * 300)
    os.chmod(reachable, 0o555)
    before = snapshot(reachable)
    line = one_error(llamadesk("list", nobody=True))
    assert "damaged" in line and "left as it is" in line
    assert snapshot(reachable) == before


def test_old_schema_in_a_read_only_folder_says_it_needs_upgrading(reachable):
    conn = sqlite3.connect(reachable / DB_NAME)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=1)
    conn.execute("COMMIT")
    conn.close()
    os.chmod(reachable, 0o555)
    before = snapshot(reachable)
    line = one_error(llamadesk("list", nobody=True))
    assert f"needs upgrading from schema version 1 to {migrations.CURRENT}" in line and "read-only" in line
    assert snapshot(reachable) == before


# --- the first write of a turn: all or nothing ------------------------------------

FULL_FILE = """
import resource, signal, sys
from app.history.errors import StoreError
from app.history.store import Store
with Store.open() as s:
    cid = int(sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # a full disk at 1 MiB
    for conv in (None, cid):
        try:
            s.begin_turn(conv, "x" * (4 << 20), system_prompt="s", model="m.gguf", settings={})
        except StoreError as e:
            print("refused:", e)
"""


def test_first_write_of_a_turn_on_a_full_disk_leaves_no_orphan():
    (cid,) = seed(1)
    before = row_counts(default_path())
    r = subprocess.run([sys.executable, "-c", FULL_FILE, str(cid)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    refused = r.stdout.strip().splitlines()
    assert len(refused) == 2 and all(line.startswith("refused: ") for line in refused), r.stdout
    assert row_counts(default_path()) == before
    with Store.open() as s:
        assert s.get_conversation(cid).system_prompt == "sys"


def test_text_that_is_not_utf8_is_refused_in_one_line_and_writes_nothing():
    (cid,) = seed(1)
    bad = "hi \udcff"  # what Python makes of the byte 0xff in argv
    before = row_counts(default_path())
    with Store.open() as s:
        for conv in (None, cid):
            with pytest.raises(StoreError, match="the message is not valid UTF-8 text") as exc:
                s.begin_turn(conv, bad, system_prompt="sys", model=None, settings={})
            assert "\n" not in str(exc.value)
        with pytest.raises(StoreError, match="the system prompt is not valid UTF-8 text"):
            s.begin_turn(None, "fine", system_prompt=bad, model=None, settings={})
        for write in (lambda: s.add_message(cid, "user", bad), lambda: s.create_conversation(bad),
                      lambda: s.rename_conversation(cid, bad)):
            with pytest.raises(StoreError, match="not valid UTF-8") as exc:
                write()
            assert "\n" not in str(exc.value) and not isinstance(exc.value, UnicodeError)
    assert row_counts(default_path()) == before


def test_begin_turn_writes_the_conversation_question_and_reply_together():
    with Store.open() as s:
        cid, q, r = s.begin_turn(None, "First question\nsecond line", system_prompt="sys",
                                 model="m.gguf", settings={"seed": 3})
        conv = s.get_conversation(cid)
        assert (conv.title, conv.system_prompt, conv.model, conv.settings) == \
               ("First question", "sys", "m.gguf", {"seed": 3})
        assert [(m.id, m.role, m.state) for m in conv.messages] == \
               [(q, "user", "complete"), (r, "assistant", "generating")]
        same, q2, r2 = s.begin_turn(cid, "again", system_prompt=None, model="other.gguf", settings=None)
        conv = s.get_conversation(cid)
        assert same == cid and (conv.system_prompt, conv.model, conv.settings) == \
               ("sys", "other.gguf", {"seed": 3})
        assert [m.id for m in conv.messages] == [q, r, q2, r2]


# --- ids and versions SQLite or we never wrote --------------------------------------

@pytest.mark.parametrize("bad_id", [MAX_ID + 1, 10**20, -(10**20), 0, -1])
def test_ids_out_of_sqlite_range_are_simply_not_found(store_with_one, bad_id):
    s = store_with_one
    for call in (lambda: s.get_conversation(bad_id), lambda: s.rename_conversation(bad_id, "t"),
                 lambda: s.delete_conversation(bad_id), lambda: s.restore_conversation(bad_id),
                 lambda: s.add_message(bad_id, "user", "x"), lambda: s.begin_reply(bad_id),
                 lambda: s.update_conversation(bad_id, model="m"),
                 lambda: s.set_out_of_context(bad_id, [1]),
                 lambda: s.begin_turn(bad_id, "x", system_prompt=None, model=None, settings=None)):
        with pytest.raises(ConversationNotFound, match=f"no (deleted )?conversation with id {bad_id}"):
            call()
    s.discard_conversation(bad_id)
    s.delete_message(bad_id)
    s.update_reply(bad_id, "x")
    with pytest.raises(StoreError, match=f"no message with id {bad_id}"):
        s.finish_reply(bad_id, "x", None)
    assert len(s.get_conversation(1).messages) == 2


@pytest.fixture
def store_with_one():
    seed(1)
    with Store.open() as s:
        yield s


@pytest.mark.parametrize("version", [-1, -(2**31)])
def test_negative_schema_version_is_refused_untouched(version):
    seed(1)
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    before = snapshot(path.parent)
    for writable in (True, False):
        with pytest.raises(StoreVersionError, match=f"schema version {version} is not one") as exc:
            Store.open(writable=writable)
        assert "left untouched" in str(exc.value) and "\n" not in str(exc.value)
    assert snapshot(path.parent) == before
