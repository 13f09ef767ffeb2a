"""Damaged and abandoned history files: what to do when SQLite cannot read one.

Kept apart from the store's normal reads and writes because it is only about
the file on disk: a corrupt file is moved aside (never deleted, with its WAL,
which may hold the newest rows), anything else is reported as it is.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

from app.chat.errors import StoreUnavailableError

log = logging.getLogger("llamadesk.store")

_CORRUPT_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


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
    """The file is not a usable SQLite database; the caller moves it aside."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def classify(path: Path, e: sqlite3.Error) -> Exception:
    """A corrupt or unopenable existing file is moved aside; anything else
    (locked, disk full, missing folder) is reported, since moving would not help."""
    name = getattr(e, "sqlite_errorname", "")
    if name in _CORRUPT_CODES or (type(e) is sqlite3.DatabaseError and not name):
        return BadFile(str(e))
    if name == "SQLITE_CANTOPEN" and path.exists():
        return BadFile(f"cannot be opened: {e}")
    return StoreUnavailableError(path, f"cannot open the history database: {e}")


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
            path, f"the history database is unreadable ({reason}) and could not be moved aside: "
                  f"{e.strerror or e}") from e
    for suffix in ("-wal", "-shm", "-journal"):  # keep them with it: the WAL may hold the newest rows
        side = Path(f"{path}{suffix}")
        if side.exists():
            try:
                os.rename(side, Path(f"{target}{suffix}"))
            except OSError:
                log.warning("could not move %s aside", side)
    return target
