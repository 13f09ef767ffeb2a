"""Opening the history file: connect, refuse a schema we did not write, check, migrate.

Kept apart from the row reads and writes because it runs once per process and
decides whether the file is usable at all; what an unusable one means is
db_file's job.

A file that cannot be written (a read-only folder, file or file system) can
still be read: `connect_read_only` opens it with SQLite's `mode=ro`, or
`immutable` when even the -shm file cannot be made, and skips everything that
writes (the journal mode, migrations; Store.open skips recovery), so
`llamadesk list` and `export` keep working where nothing can be saved.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.history import migrations
from app.history.db_file import BadFile, NotWritable, classify, move_aside
from app.history.errors import StoreUnavailableError, StoreVersionError

BUSY_TIMEOUT_MS = 15_000  # a writer waits this long for another process's write


class NeedsUpgrade(StoreUnavailableError):
    """An older schema cannot be read as it is, and migrating it would write."""


Opened = tuple[sqlite3.Connection, bool, Path | None, str | None]


def connect_or_move_aside(path: Path, check: bool) -> Opened:
    """(connection, fts in use, where a damaged file went, why): a damaged
    file is moved aside once and a fresh one started in its place."""
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
        return conn, _prepare(conn, path, check, None)
    except BaseException:
        conn.close()
        raise


def connect_read_only(path: Path, check: bool, why: str) -> tuple[sqlite3.Connection, bool, str]:
    """(connection, fts in use, what to tell the user) for a file that cannot be
    written (`why`): SQLite's `mode=ro`, else `immutable`, which needs no -shm
    file but cannot see rows still in the -wal, so the notice says so."""
    if not path.is_file():
        raise StoreUnavailableError(path, f"there is no history database yet, and none can be "
                                          f"created: {why}")
    failure: Exception | None = None
    for query in ("mode=ro", "immutable=1"):
        try:
            conn = sqlite3.connect(f"{path.as_uri()}?{query}", uri=True, isolation_level=None,
                                   timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        except sqlite3.Error as e:
            failure = e
            continue
        try:
            fts = _prepare(conn, path, check, why)
        except NotWritable as e:  # this way of reading needs a write too: try the next
            conn.close()
            failure = e
            continue
        except NeedsUpgrade as e:
            conn.close()
            raise NeedsUpgrade(path, f"{e.reason}: {why}") from e
        except BadFile as e:
            conn.close()
            raise StoreUnavailableError(path, f"the history database is damaged ({e.reason}); it was "
                                              f"left as it is, since it cannot be written: {why}") from e
        except BaseException:
            conn.close()
            raise
        notice = f"{path}: opened the history read-only, so nothing will be saved: {why}"
        wal = Path(f"{path}-wal")
        if query.startswith("immutable") and wal.is_file() and wal.stat().st_size > 0:
            notice += f" (the newest changes, still in {wal.name}, are not shown)"
        return conn, fts, notice
    if isinstance(failure, NotWritable):
        raise StoreUnavailableError(path, failure.reason) from failure
    raise StoreUnavailableError(path, f"cannot open the history database: {failure}") from failure


def _prepare(conn: sqlite3.Connection, path: Path, check: bool, read_only: str | None) -> bool:
    """Checks and migrates; `read_only` (why nothing can be written) skips every write."""
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = migrations.user_version(conn)  # reads the header: fails on a non-database
        _refuse_foreign(path, version)
        if check:
            res = conn.execute("PRAGMA quick_check").fetchone()[0]
            if res != "ok":
                raise BadFile(f"failed its integrity check: {res}")
        available = migrations.fts_available()
        if read_only is not None:
            return _readable_as_is(conn, path, version, available)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # with WAL: durable against process crashes
        conn.execute("PRAGMA foreign_keys = ON")
        if migrations.needs_work(conn, available):
            return _migrate(conn, path, available)
        return available
    except sqlite3.Error as e:
        raise classify(path, e) from e


def _refuse_foreign(path: Path, version: int) -> None:
    """A schema we did not write is never touched: an older schema's writes could
    corrupt data we do not understand, and a negative version was never ours."""
    if version > migrations.CURRENT:
        raise StoreVersionError(
            path, f"written by a newer LlamaDesk (schema version {version}, this one reads up "
                  f"to {migrations.CURRENT}); left untouched: update LlamaDesk to open it")
    if version < 0:
        raise StoreVersionError(
            path, f"schema version {version} is not one any LlamaDesk writes (this one reads 0 to "
                  f"{migrations.CURRENT}); left untouched")


def _readable_as_is(conn: sqlite3.Connection, path: Path, version: int, available: bool) -> bool:
    """Without writes there is no migrating: an older schema is refused in one line."""
    if version != migrations.CURRENT:
        raise NeedsUpgrade(path, f"the history database needs upgrading from schema version "
                                 f"{version} to {migrations.CURRENT}, which needs write access")
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    return available and all(t in names for t in migrations.FTS_TRIGGERS)


def _migrate(conn: sqlite3.Connection, path: Path, available: bool) -> bool:
    """Schema steps and the search index in one write transaction, so a
    second process opening at the same moment sees all of it or none."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        _refuse_foreign(path, migrations.user_version(conn))  # another process may have migrated
        migrations.migrate(conn)
        fts = migrations.ensure_search_index(conn, available)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return fts
