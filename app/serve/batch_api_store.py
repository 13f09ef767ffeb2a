"""The Batch API's files and batches, in SQLite under the data folder: a server that is
killed and started again finds every batch where it was, and resumes the unfinished ones.

File contents live beside the database as plain files (a batch input can be
hundreds of MB); the database holds their metadata and every batch's state.

The folder is checked when the store opens, before the server loads a model:
a damaged database or one that is not this server's is one StoreError line,
never a traceback. A folder that cannot be written (read-only, full) does not
stop the server, whose chat needs no disk: the store opens read-only
(`read_only` says why), its files and batches are read as they are, every
write is a StoreError naming the folder, and the batches it cannot go on with
are shown failed with that reason, left unfinished on disk for a start on a
writable folder to resume. Later, a disk that fills or fails under a request
is a StoreError too: the route answers 503 and the server goes on. SQLite
refusing what this module asked (bad SQL, a constraint, a misused connection)
is sorted out by its result code (app.sqlite_errors, as the history store
does) and is a StoreBug instead: a 500 that says it is LlamaDesk's bug, its
traceback in the server's log, never a 503 that sends the operator to check a
disk that is fine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from app import atomic_file, sqlite_errors
from app.errors import LlamaDeskError

log = logging.getLogger("llamadesk.serve.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
  id TEXT PRIMARY KEY, purpose TEXT NOT NULL, filename TEXT NOT NULL, bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL, path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
  id TEXT PRIMARY KEY, input_file_id TEXT NOT NULL, endpoint TEXT NOT NULL,
  completion_window TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
  in_progress_at INTEGER, finalizing_at INTEGER, completed_at INTEGER, failed_at INTEGER,
  cancelling_at INTEGER, cancelled_at INTEGER, output_file_id TEXT, error_file_id TEXT,
  total INTEGER NOT NULL DEFAULT 0, completed INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0, errors TEXT, metadata TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
FILE_FIELDS = ("id", "purpose", "filename", "bytes", "created_at", "path")
BATCH_FIELDS = ("id", "input_file_id", "endpoint", "completion_window", "status", "created_at",
                "in_progress_at", "finalizing_at", "completed_at", "failed_at", "cancelling_at",
                "cancelled_at", "output_file_id", "error_file_id", "total", "completed", "failed",
                "errors", "metadata")


class StoreError(LlamaDeskError):
    """The server's data folder cannot be used: one line saying which file and why."""


class StoreBug(LlamaDeskError):
    """SQLite refused what the store asked, for a reason of ours. Not a StoreError: what waits
    out a full disk or fails a batch for one must not take a bug for it."""


def reason(e: BaseException) -> str:
    """An OSError's or SQLite's own words, without the errno prefix."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def _printable(v):
    """A stored value as JSON can answer it: a lone surrogate kept by an older server (before
    metadata was checked) becomes its escape instead of failing every listing."""
    if isinstance(v, str):
        return v.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(v, dict):
        return {_printable(k): _printable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_printable(x) for x in v]
    return v


class BatchStore:
    """Every method blocks on SQLite or the disk: async routes call it in a worker thread."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.db_path = self.folder / "serve.db"
        self._lock = threading.Lock()
        self.read_only: str | None = None  # why the folder cannot be written, when it cannot
        try:
            for sub in ("files", "journals"):
                (self.folder / sub).mkdir(parents=True, exist_ok=True)
                _probe(self.folder / sub)
        except OSError as e:
            why = f"the server's data folder {self.folder} cannot be written ({reason(e)})"
            if not self.folder.is_dir():
                raise StoreError(why) from None
            self.read_only = why
            log.warning("%s: its files and batches are read as they are, and nothing new is stored", why)
        try:
            self.db = self._open_read_only() if self.read_only else sqlite3.connect(
                self.db_path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"{self.db_path}: cannot open the server's database ({reason(e)})") from None
        try:
            self._check()
        except BaseException:
            self.db.close()
            raise

    def _open_read_only(self) -> sqlite3.Connection:
        """The database as it is, for reading. A server killed mid-batch left its WAL and the
        WAL's index beside it, which a read-only connection reads through; one closed cleanly
        left neither, and a WAL database cannot make its index in a folder that takes no write,
        so it is opened as immutable, which nothing can contradict while the folder stays so.
        No database yet: an empty one in memory, holding nothing to read."""
        def connect(target: str, uri: bool = True) -> sqlite3.Connection:
            db = sqlite3.connect(target, uri=uri, check_same_thread=False, isolation_level=None)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # connecting opens nothing yet
            except BaseException:
                db.close()
                raise
            return db

        if not self.db_path.exists():
            db = connect(":memory:", uri=False)
            db.executescript(SCHEMA)
            return db
        target = self.db_path.resolve().as_uri()
        try:
            return connect(f"{target}?mode=ro")
        except sqlite3.Error:
            wal = self.db_path.with_name(self.db_path.name + "-wal")
            if wal.exists() and wal.stat().st_size > 0:  # immutable would read past what the WAL holds
                raise
        return connect(f"{target}?mode=ro&immutable=1")

    def _writable(self, doing: str) -> None:
        """StoreError before a write the folder cannot take, saying which folder and why."""
        if self.read_only is not None:
            raise StoreError(f"{self.read_only}: could not {doing}; start the server with a writable "
                             "data folder")

    def _check(self) -> None:
        """A database that is this server's, whole, and writable (unless the folder is not), or
        StoreError."""
        where = f"{self.db_path}: "
        aside = "; move it aside to start with an empty one"
        try:
            if self.read_only is None:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.executescript(SCHEMA)
            ok = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
            cols = {t: {r[1] for r in self.db.execute(f"PRAGMA table_info({t})")}
                    for t in ("files", "batches")}
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{where}not a usable server database ({reason(e)}){aside}") from None
        if ok != "ok":
            raise StoreError(f"{where}the database is damaged ({ok}){aside}")
        for table, want in (("files", FILE_FIELDS), ("batches", BATCH_FIELDS)):
            missing = [c for c in want if c not in cols[table]]
            if missing:
                raise StoreError(f"{where}its {table} table lacks {', '.join(missing)}: not a LlamaDesk "
                                 f"server database{aside}")
        if self.read_only is not None:
            return
        try:  # a real write: a read-only database or folder only says so when written
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('opened_at', ?)", (str(int(time.time())),))
        except sqlite3.Error as e:
            raise StoreError(f"{where}cannot be written ({reason(e)})") from None

    @contextlib.contextmanager
    def _db(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self.db
            except sqlite3.Error as e:
                if sqlite_errors.is_bug(e):
                    line = sqlite_errors.report_bug(log, "the server's batch store", e)
                    raise StoreBug(f"{self.db_path}: could not {doing}: {line}; the server's log has "
                                   "the details") from e
                raise StoreError(f"{self.db_path}: could not {doing} ({reason(e)})") from None

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # -- files ----------------------------------------------------------------
    def add_file(self, purpose: str, filename: str, data: bytes | Iterable[bytes]) -> dict:
        """`data` whole, or in pieces (an upload, checked as it is copied: a piece that raises
        leaves no file behind)."""
        self._writable(f"store {filename!r}")
        fid = f"file-{uuid.uuid4().hex[:24]}"
        path = self.folder / "files" / fid
        pieces = [data] if isinstance(data, bytes) else data
        try:
            with atomic_file.replacing_fd(path) as fd:
                size = sum(atomic_file.write_all(fd, piece) for piece in pieces)
        except OSError as e:
            raise StoreError(f"could not store {filename!r} in {path.parent} ({reason(e)})") from None
        row = (fid, purpose, filename, size, int(time.time()), str(path))
        try:
            with self._db("record the file"):
                self.db.execute("INSERT INTO files VALUES (?,?,?,?,?,?)", row)
        except BaseException:  # a file no record names would never be listed, nor deleted
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        found = self.file(fid)
        assert found is not None  # just inserted
        return found

    def file(self, fid: str) -> dict | None:
        with self._db("read a file's record"):
            r = self.db.execute(f"SELECT {', '.join(FILE_FIELDS)} FROM files WHERE id=?", (fid,)).fetchone()
        return None if r is None else dict(zip(FILE_FIELDS, r))

    def files(self) -> list[dict]:
        with self._db("list the files"):
            rows = self.db.execute(f"SELECT {', '.join(FILE_FIELDS)} FROM files ORDER BY created_at DESC, "
                                   "rowid DESC").fetchall()
        return [dict(zip(FILE_FIELDS, r)) for r in rows]

    def delete_file(self, fid: str) -> dict | None:
        """Forget a file and free its disk; None if there is no such file. The input of a batch
        still to run is kept (ValueError naming the batch): a resumed batch reads it again."""
        row = self.file(fid)
        if row is None:
            return None
        users = [b["id"] for b in self.unfinished() if b["input_file_id"] == fid]
        if users:
            raise ValueError(f"{fid} is the input of {users[0]}, which has not finished; cancel it first")
        self._writable(f"delete {fid}")
        try:
            os.unlink(row["path"])  # first: a file that cannot be removed keeps its record
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StoreError(f"could not delete {row['path']} ({reason(e)})") from None
        with self._db("delete the file's record"):
            self.db.execute("DELETE FROM files WHERE id=?", (fid,))
        return row

    # -- batches --------------------------------------------------------------
    def add_batch(self, input_file_id: str, endpoint: str, window: str, metadata: dict | None) -> dict:
        self._writable("record the batch")
        bid = f"batch_{uuid.uuid4().hex[:24]}"
        with self._db("record the batch"):
            self.db.execute("INSERT INTO batches (id, input_file_id, endpoint, completion_window, status, "
                            "created_at, metadata) VALUES (?,?,?,?,?,?,?)",
                            (bid, input_file_id, endpoint, window, "validating", int(time.time()),
                             json.dumps(metadata) if metadata else None))
        found = self.batch(bid)
        assert found is not None  # just inserted
        return found

    def update(self, bid: str, **fields) -> None:
        """`errors`, if given, is OpenAI's errors list (protocol.batch_errors), kept as JSON text."""
        if fields.get("errors") is not None:
            fields["errors"] = json.dumps(fields["errors"])
        self._writable(f"update {bid}")
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._db(f"update {bid}"):
            self.db.execute(f"UPDATE batches SET {cols} WHERE id=?", (*fields.values(), bid))

    def count(self, bid: str, ok: bool) -> None:
        self._writable(f"count a result of {bid}")
        col = "completed" if ok else "failed"
        with self._db(f"count a result of {bid}"):
            self.db.execute(f"UPDATE batches SET {col}={col}+1 WHERE id=?", (bid,))

    def batch(self, bid: str) -> dict | None:
        with self._db(f"read {bid}"):
            r = self.db.execute(f"SELECT {', '.join(BATCH_FIELDS)} FROM batches WHERE id=?",
                                (bid,)).fetchone()
        return None if r is None else _batch(r)

    def batches(self) -> list[dict]:
        with self._db("list the batches"):
            rows = self.db.execute(f"SELECT {', '.join(BATCH_FIELDS)} FROM batches "
                                   "ORDER BY created_at DESC, rowid DESC").fetchall()
        return [_batch(r) for r in rows]

    def unfinished(self) -> list[dict]:
        return [b for b in self.batches() if b["status"] in UNFINISHED]

    def journal_path(self, bid: str) -> Path:
        return self.folder / "journals" / f"{bid}.jsonl"


def _batch(r: tuple) -> dict:
    b = dict(zip(BATCH_FIELDS, r))
    b["errors"] = _printable(json.loads(b["errors"])) if b["errors"] else None
    b["metadata"] = _printable(json.loads(b["metadata"])) if b["metadata"] else None
    return b


def _probe(folder: Path) -> None:
    """Write, sync and remove a small file in `folder`: a read-only or full file system, or a
    size limit, says so now rather than at a batch's first result."""
    fd, tmp = atomic_file.temp_beside(folder / "probe")
    try:
        atomic_file.write_all(fd, b"\n" * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
