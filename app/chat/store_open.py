"""Opening the history file: connect, refuse a newer schema, check, migrate.

Kept apart from the row reads and writes because it runs once per process and
decides whether the file is usable at all; what to do with an unusable one is
store_files' job.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.chat import migrations
from app.chat.errors import StoreUnavailableError, StoreVersionError
from app.chat.store_files import BadFile, classify, move_aside

BUSY_TIMEOUT_MS = 15_000  # a writer waits this long for another process's write


Opened = tuple[sqlite3.Connection, bool, Path | None, str | None]


def connect_or_move_aside(path: Path, check: bool) -> Opened:
    """(connection, fts in use, where a bad file went, why): a file SQLite
    cannot read is moved aside once and a fresh one started in its place."""
    try:
        conn, fts = connect(path, check)
        return conn, fts, None, None
    except BadFile as bad:
        moved = move_aside(path, bad.reason)
        try:
            conn, fts = connect(path, check)
        except BadFile as again:
            raise StoreUnavailableError(
                path, f"a new history database is unusable too: {again}") from again
        return conn, fts, moved, bad.reason


def connect(path: Path, check: bool) -> tuple[sqlite3.Connection, bool]:
    """A prepared connection (autocommit: every write opens its own transaction)
    and whether the full-text index is in use."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreUnavailableError(path, f"cannot create its folder: {e.strerror or e}") from e
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as e:
        raise classify(path, e) from e
    try:
        return conn, _prepare(conn, path, check)
    except BaseException:
        conn.close()
        raise


def _prepare(conn: sqlite3.Connection, path: Path, check: bool) -> bool:
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = migrations.user_version(conn)  # reads the header: fails on a non-database
        if version > migrations.CURRENT:
            raise StoreVersionError(
                path, f"written by a newer LlamaDesk (schema version {version}, this one reads up "
                      f"to {migrations.CURRENT}); left untouched: update LlamaDesk to open it")
        if check:
            res = conn.execute("PRAGMA quick_check").fetchone()[0]
            if res != "ok":
                raise BadFile(f"failed its integrity check: {res}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable against process crashes
        conn.execute("PRAGMA foreign_keys = ON")
        available = migrations.fts_available()
        if migrations.needs_work(conn, available):
            return _migrate(conn, path, available)
        return available
    except sqlite3.Error as e:
        raise classify(path, e) from e


def _migrate(conn: sqlite3.Connection, path: Path, available: bool) -> bool:
    """Schema steps and the search index in one write transaction, so a
    second process opening at the same moment sees all of it or none."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = migrations.user_version(conn)  # another process may have migrated
        if version > migrations.CURRENT:
            raise StoreVersionError(path, f"written by a newer LlamaDesk (schema version "
                                          f"{version}); left untouched")
        migrations.migrate(conn)
        fts = migrations.ensure_search_index(conn, available)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return fts
