"""Damaged, unopenable and abandoned history files: what SQLite's refusal means.

Kept apart from the store's normal reads and writes because it is only about
the file on disk. The one distinction that matters is damaged versus
unopenable: only a file SQLite opened and found damaged (not a database, a
failed integrity check) is moved aside, never deleted, with its WAL, which may
hold the newest rows. A healthy file that merely cannot be opened (too few file
descriptors, no permission, a read-only folder or file system, a full disk)
is left exactly where it is, and the error says which of these it is, because
moving it would lose nothing less than the user's whole history view.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

from app.history.errors import StoreUnavailableError

log = logging.getLogger("llamadesk.store")

_CORRUPT_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")
_FD_PROBES = 3  # a WAL database needs its file, the -wal and the -shm open at once


def pid_alive(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill(pid, 0) would terminate it there
        return True  # rely on the heartbeat alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BadFile(Exception):
    """SQLite opened the file and found it damaged; the caller moves it aside."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class NotWritable(StoreUnavailableError):
    """The file is fine but cannot be written here; reading it read-only may still work."""


def classify(path: Path, e: sqlite3.Error) -> Exception:
    """Only damage is moved aside; anything else is reported as what it is."""
    name = getattr(e, "sqlite_errorname", "") or ""
    if name.startswith(tuple(_CORRUPT_CODES)) or (type(e) is sqlite3.DatabaseError and not name):
        return BadFile(str(e))
    if name.startswith(_BUSY_CODES):
        return StoreUnavailableError(path, "cannot open the history database: another program keeps "
                                           f"it locked ({e})")
    why, readable = diagnose(path)
    if why is None:
        why = str(e)
        readable = name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FULL"))
    cls = NotWritable if readable else StoreUnavailableError
    return cls(path, f"cannot open the history database: {why}")


def diagnose(path: Path) -> tuple[str | None, bool]:
    """(why the file cannot be opened, whether reading it read-only may still work).

    SQLite says only "unable to open database file" or "disk I/O error", so the
    cause is found by asking the system the same questions SQLite did.
    """
    if _out_of_fds():
        return "too many open files (the limit set by ulimit -n is too low)", False
    folder = path.parent
    if not os.access(folder, os.X_OK):
        return f"permission denied: the folder {folder} cannot be opened", False
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as e:
        return f"cannot look at it: {e.strerror or e}", False
    if is_dir:
        return "it is a folder, not a database file", False
    if exists and not os.access(path, os.R_OK):
        return "permission denied: the file is not readable", False
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs on Windows
        st = None
    if st is not None and st.f_flag & os.ST_RDONLY:
        return f"the file system holding {folder} is mounted read-only", True
    if not os.access(folder, os.W_OK):
        return f"the folder {folder} is read-only", True
    if exists and not os.access(path, os.W_OK):
        return "the file is read-only", True
    if st is not None and st.f_bavail == 0:
        return f"the disk holding {folder} is full", True
    return None, True


def _out_of_fds() -> bool:
    fds = []
    try:
        for _ in range(_FD_PROBES):
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as e:
        return e.errno in (errno.EMFILE, errno.ENFILE)
    finally:
        for fd in fds:
            os.close(fd)
    return False


def move_aside(path: Path, reason: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.unreadable-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.unreadable-{stamp}-{n}")
        n += 1
    try:
        os.rename(path, target)
    except OSError as e:
        raise StoreUnavailableError(
            path, f"the history database is damaged ({reason}) and could not be moved aside, so it "
                  f"was left as it is: {e.strerror or e}") from e
    for suffix in ("-wal", "-shm", "-journal"):  # keep them with it: the WAL may hold the newest rows
        side = Path(f"{path}{suffix}")
        if side.exists():
            try:
                os.rename(side, Path(f"{target}{suffix}"))
            except OSError:
                log.warning("could not move %s aside", side)
    return target
