"""The Batch API's files and batches, in SQLite under the data folder: a server that is
killed and started again finds every batch where it was, and resumes the unfinished ones.

File contents live beside the database as plain files (a batch input can be
hundreds of MB); the database holds their metadata and every batch's state.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from app import atomic_file

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
"""
UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
BATCH_FIELDS = ("id", "input_file_id", "endpoint", "completion_window", "status", "created_at",
                "in_progress_at", "finalizing_at", "completed_at", "failed_at", "cancelling_at",
                "cancelled_at", "output_file_id", "error_file_id", "total", "completed", "failed",
                "errors", "metadata")


class BatchStore:
    """Every method blocks on SQLite or the disk: async routes call it in a worker thread."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        (self.folder / "files").mkdir(parents=True, exist_ok=True)
        (self.folder / "journals").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.db = sqlite3.connect(self.folder / "serve.db", check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # -- files ----------------------------------------------------------------
    def add_file(self, purpose: str, filename: str, data: bytes | Iterable[bytes]) -> dict:
        """`data` whole, or in pieces (an upload, checked as it is copied: a piece that raises
        leaves no file behind)."""
        fid = f"file-{uuid.uuid4().hex[:24]}"
        path = self.folder / "files" / fid
        pieces = [data] if isinstance(data, bytes) else data
        with atomic_file.replacing_fd(path) as fd:
            size = sum(atomic_file.write_all(fd, piece) for piece in pieces)
        row = (fid, purpose, filename, size, int(time.time()), str(path))
        with self._lock:
            self.db.execute("INSERT INTO files VALUES (?,?,?,?,?,?)", row)
        return self.file(fid)

    def file(self, fid: str) -> dict | None:
        with self._lock:
            r = self.db.execute("SELECT id, purpose, filename, bytes, created_at, path FROM files WHERE id=?",
                                (fid,)).fetchone()
        if r is None:
            return None
        return dict(zip(("id", "purpose", "filename", "bytes", "created_at", "path"), r))

    def files(self) -> list[dict]:
        with self._lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM files ORDER BY created_at DESC, id")]
        return [self.file(i) for i in ids]

    # -- batches --------------------------------------------------------------
    def add_batch(self, input_file_id: str, endpoint: str, window: str, metadata: dict | None) -> dict:
        bid = f"batch_{uuid.uuid4().hex[:24]}"
        with self._lock:
            self.db.execute("INSERT INTO batches (id, input_file_id, endpoint, completion_window, status, "
                            "created_at, metadata) VALUES (?,?,?,?,?,?,?)",
                            (bid, input_file_id, endpoint, window, "validating", int(time.time()),
                             json.dumps(metadata) if metadata else None))
        return self.batch(bid)

    def update(self, bid: str, **fields) -> None:
        """`errors`, if given, is OpenAI's errors list (protocol.batch_errors), kept as JSON text."""
        if fields.get("errors") is not None:
            fields["errors"] = json.dumps(fields["errors"])
        cols = ", ".join(f"{k}=?" for k in fields)
        with self._lock:
            self.db.execute(f"UPDATE batches SET {cols} WHERE id=?", (*fields.values(), bid))

    def count(self, bid: str, ok: bool) -> None:
        col = "completed" if ok else "failed"
        with self._lock:
            self.db.execute(f"UPDATE batches SET {col}={col}+1 WHERE id=?", (bid,))

    def batch(self, bid: str) -> dict | None:
        with self._lock:
            r = self.db.execute(f"SELECT {', '.join(BATCH_FIELDS)} FROM batches WHERE id=?",
                                (bid,)).fetchone()
        if r is None:
            return None
        b = dict(zip(BATCH_FIELDS, r))
        b["errors"] = json.loads(b["errors"]) if b["errors"] else None
        b["metadata"] = json.loads(b["metadata"]) if b["metadata"] else None
        return b

    def batches(self) -> list[dict]:
        with self._lock:
            rows = self.db.execute("SELECT id FROM batches ORDER BY created_at DESC, rowid DESC")
            ids = [r[0] for r in rows]
        return [self.batch(i) for i in ids]

    def unfinished(self) -> list[dict]:
        return [b for b in self.batches() if b["status"] in UNFINISHED]

    def journal_path(self, bid: str) -> Path:
        return self.folder / "journals" / f"{bid}.jsonl"

