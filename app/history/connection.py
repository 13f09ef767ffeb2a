"""The one connection every part of the store shares, and its transactions.

One connection guarded by a re-entrant lock, usable from any thread: the
window reads and records on its GUI thread, `llamadesk ask` saves the growing
reply from a timer thread while its worker decodes, and a second process
writes through its own connection (WAL and a busy timeout keep both safe).

SQLite's errors are split by blame (app.sqlite_errors, shared with the
server's Batch API store): a busy, read-only, full, unreadable or damaged
database is the environment's, a StoreError for the user to act on; anything
else (bad SQL, a constraint, a misused connection) is a StoreBug, logged with
its traceback and reported as one.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from app import sqlite_errors
from app.history.errors import ConversationNotFound, StoreBug, StoreError

log = logging.getLogger("llamadesk.history")
MAX_ID = 2**63 - 1  # SQLite's INTEGER PRIMARY KEY range: rows are numbered from 1


def store_error(path: Path, e: sqlite3.Error) -> StoreError:
    """`e` as the one-line error the user reads: the environment's, or a bug of ours."""
    if not sqlite_errors.is_bug(e):
        return StoreError(path, f"database error: {e}")
    line = sqlite_errors.report_bug(log, "the history store", e)
    return StoreBug(path, f"{line}, the log file has the details")


class StoreBase:
    def __init__(self, conn: sqlite3.Connection, path: Path, fts: bool):
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.RLock()
        self.path = path
        self.fts = fts  # full-text index in use (else search scans with LIKE)
        self.moved_to: Path | None = None  # where an unreadable database went
        self.notice: str | None = None  # one line to show the user, if any
        self.recovered = 0  # replies marked interrupted when this store opened
        self.read_only = False  # opened with Store.open(writable=False) on a file it cannot write

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise StoreError(self.path, "the history store is closed")
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise store_error(self.path, e) from e
            except UnicodeEncodeError as e:  # a lone surrogate (from undecodable bytes) cannot be stored
                raise StoreError(self.path, f"the text is not valid UTF-8 (character {e.start + 1} comes "
                                            "from bytes that are not UTF-8); nothing was saved") from e

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front so a
        concurrent writer waits (busy timeout) instead of failing mid-way."""
        if self.read_only:
            raise StoreError(self.path, "the history was opened read-only; nothing can be saved")
        with self._read() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _check_id(self, conv_id: int) -> None:
        """An id SQLite could never have given is simply not there (it would
        otherwise fail to bind, with OverflowError)."""
        if not 1 <= conv_id <= MAX_ID:
            raise ConversationNotFound(self.path, f"no conversation with id {conv_id}")

    def _require(self, conn: sqlite3.Connection, conv_id: int) -> None:
        self._check_id(conv_id)
        row = conn.execute("SELECT 1 FROM conversations WHERE id = ? AND deleted_at IS NULL",
                           (conv_id,)).fetchone()
        if row is None:
            raise ConversationNotFound(self.path, f"no conversation with id {conv_id}")
