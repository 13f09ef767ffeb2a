"""Where an export lands: through symlinks, into FIFOs and devices, with the modes a user expects.

Real links, real FIFOs, the real /dev/null and /dev/stdout, the real umask;
the unwritable-folder case drops root's privileges in a forked child.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from app.history import export
from app.history.errors import ExportError
from app.history.store import Store


@pytest.fixture
def conv():
    with Store.open() as s:
        cid = s.create_conversation(system_prompt="be brief", model="gemma.gguf")
        s.add_message(cid, "user", "Héllo 🦙, " + "long line " * 20_000)  # more than a pipe buffer holds
        s.add_message(cid, "assistant", "Hi!")
        return s.get_conversation(cid)


@pytest.fixture
def out(tmp_path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture
def umask():
    """Set the process umask for one test; pytest runs tests on one thread."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_a_symlink_keeps_pointing_at_the_new_content(conv, out):
    elsewhere = out / "real"
    elsewhere.mkdir()
    target = elsewhere / "t.md"
    target.write_text("stale")
    os.chmod(target, 0o640)
    link = out / "link.md"
    os.symlink(target, link)
    chain = out / "chain.md"
    os.symlink("link.md", chain)  # relative, and a link to a link
    export.export(conv, chain)
    assert link.is_symlink() and chain.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text("utf-8") == export.render(conv, "md")
    assert _mode(target) == 0o640
    assert sorted(p.name for p in elsewhere.iterdir()) == ["t.md"]  # no temporary left beside it
    assert sorted(p.name for p in out.iterdir()) == ["chain.md", "link.md", "real"]


def test_a_dangling_symlink_gets_its_target_created(conv, out, umask):
    link = out / "link.txt"
    os.symlink("made.txt", link)
    export.export(conv, link)
    assert link.is_symlink() and (out / "made.txt").read_text("utf-8") == export.render(conv, "txt")
    assert _mode(out / "made.txt") == 0o644


def test_a_fifo_reader_receives_the_whole_export(conv, out):
    fifo = out / "pipe.md"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    export.export(conv, fifo)
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert got == [export.render(conv, "md").encode("utf-8")]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, and nothing else in the folder
    assert [p.name for p in out.iterdir()] == ["pipe.md"]


def test_a_fifo_whose_reader_leaves_early_is_one_line(conv, out):
    fifo = out / "pipe.md"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: os.close(os.open(fifo, os.O_RDONLY)))
    reader.start()
    with pytest.raises(ExportError) as exc:
        export.export(conv, fifo)
    reader.join(timeout=30)
    msg = str(exc.value)
    assert msg.startswith(f"{fifo}: ") and "reader closed it" in msg and "\n" not in msg
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_null_stays_the_null_device(conv):
    before = os.stat("/dev/null")
    assert export.export(conv, "/dev/null", "html") == Path("/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_mode == before.st_mode


def test_dev_stdout_writes_to_the_callers_stdout(conv, out):
    """Through a pipe, and appended to a file the shell opened, like `>> file`."""
    code = ("import sys; from app.history import export; from app.history.store import Store\n"
            "conv = Store.open().get_conversation(int(sys.argv[1]))\n"
            "export.export(conv, '/dev/stdout', 'txt')\n")
    piped = subprocess.run([sys.executable, "-c", code, str(conv.id)], capture_output=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == export.render(conv, "txt").encode("utf-8")
    log = out / "log.txt"
    log.write_text("earlier line\n")
    with open(log, "a") as f:
        r = subprocess.run([sys.executable, "-c", code, str(conv.id)], stdout=f, stderr=subprocess.PIPE,
                           timeout=60)
    assert r.returncode == 0, r.stderr
    assert log.read_text("utf-8") == "earlier line\n" + export.render(conv, "txt")
    assert [p.name for p in out.iterdir()] == ["log.txt"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_the_umask_gives(conv, out, umask, mask, mode):
    umask(mask)
    p = export.export(conv, out / "new.html")
    assert _mode(p) == mode == 0o666 & ~mask


@pytest.mark.parametrize("old", [0o644, 0o640, 0o604])
def test_a_replaced_file_keeps_its_mode(conv, out, umask, old):
    umask(0o077)  # a strict umask must not tighten a file the user already shares
    p = out / "shared.json"
    p.write_text("old")
    os.chmod(p, old)
    export.export(conv, p)
    assert _mode(p) == old and p.read_text("utf-8").startswith("{")


def test_a_folder_as_target_is_one_line(conv, out):
    d = out / "dir.md"
    d.mkdir()
    with pytest.raises(ExportError) as exc:
        export.export(conv, d)
    assert str(exc.value) == f"{d}: cannot write it: it is a folder; nothing was written"
    assert list(d.iterdir()) == []


def test_a_missing_folder_is_one_line_naming_it(conv, out):
    target = out / "nope" / "deeper" / "t.md"
    with pytest.raises(ExportError) as exc:
        export.export(conv, target)
    assert str(exc.value) == (f"{target}: cannot write it: the folder {target.parent} does not exist; "
                              "nothing was written")
    assert list(out.iterdir()) == []


def test_a_symlink_loop_is_one_line(conv, out):
    os.symlink("b.md", out / "a.md")
    os.symlink("a.md", out / "b.md")
    with pytest.raises(ExportError) as exc:
        export.export(conv, out / "a.md")
    assert str(exc.value) == f"{out / 'a.md'}: cannot write it: it is a symlink loop; nothing was written"


def _as_nobody(fn) -> str:
    """Run fn() in a forked child with root's privileges dropped; the ExportError line, or ""."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                fn()
                msg = ""
            except ExportError as e:
                msg = str(e)
            os.write(write_fd, msg.encode())
            os._exit(0)
        except BaseException:  # noqa: BLE001 - a forked child must never return into pytest
            os._exit(99)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        msg = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return msg


@pytest.fixture
def public_dir():
    """A folder an unprivileged user can reach (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="llamadesk-export-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_an_unwritable_folder_or_read_only_file_is_one_line(conv, public_dir):
    locked = public_dir / "locked"
    locked.mkdir(mode=0o755)
    target = locked / "t.md"
    mine = public_dir / "mine"
    mine.mkdir()
    os.chown(mine, 65534, 65534)
    readonly = mine / "keep.md"
    readonly.write_text("keep me")
    os.chown(readonly, 65534, 65534)
    os.chmod(readonly, 0o444)
    msg = _as_nobody(lambda: export.export(conv, target))
    assert msg == (f"{target}: cannot write it: the folder {locked} is not writable (permission denied); "
                   "nothing was written")
    msg = _as_nobody(lambda: export.export(conv, readonly))
    assert msg == f"{readonly}: cannot write it: the file is read-only; nothing was written"
    assert readonly.read_text() == "keep me" and list(locked.iterdir()) == []
    assert _as_nobody(lambda: export.export(conv, mine / "fresh.md")) == ""
    assert os.stat(mine / "fresh.md").st_uid == 65534


def test_cli_export_through_a_symlink_and_into_a_fifo(conv, out, tmp_path):
    """The same paths through `llamadesk export`, which the window's Ctrl+E shares."""
    target = out / "real.md"
    target.write_text("stale")
    os.symlink("real.md", out / "link.md")
    r = subprocess.run([sys.executable, "-m", "app", "export", str(conv.id), "-o", str(out / "link.md")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (out / "link.md").is_symlink() and target.read_text("utf-8") == export.render(conv, "md")
    fifo = out / "pipe.txt"
    os.mkfifo(fifo)
    received = tmp_path / "received.txt"
    with open(received, "wb") as sink:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        r = subprocess.run([sys.executable, "-m", "app", "export", str(conv.id), "-o", str(fifo)],
                           capture_output=True, text=True, timeout=60)
        reader.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    assert received.read_bytes() == export.render(conv, "txt").encode("utf-8")
    missing = out / "nope" / "t.md"
    r = subprocess.run([sys.executable, "-m", "app", "export", str(conv.id), "-o", str(missing)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"llamadesk: error: {missing}: cannot write it: the folder {missing.parent} does not exist; "
        "nothing was written"]


def test_odd_names_are_one_line_each(conv, out):
    import socket

    sock_path = out / "sock.md"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        cases = {
            str(out / ("a" * 300 + ".md")): "file name too long; nothing was written",
            str(out / "new.md") + "/": "the name ends in / but it is not a folder; nothing was written",
            str(sock_path): "it is a socket, not a file; nothing was written",
        }
        for target, reason in cases.items():
            with pytest.raises(ExportError) as exc:
                export.export(conv, target)
            assert str(exc.value) == f"{Path(target)}: cannot write it: {reason}"
    with pytest.raises(ValueError, match=r"^the export file name is empty$"):
        export.export(conv, "")
    assert [p.name for p in out.iterdir()] == ["sock.md"]


def test_dev_full_is_one_line_too(conv):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(ExportError) as exc:
        export.export(conv, "/dev/full", "md")
    assert str(exc.value) == "/dev/full: cannot write it: no space left on the device; nothing was written"
