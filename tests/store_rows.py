"""Counting the history's rows straight from the file, as another process would see them.

Tests that check "nothing was written" compare these counts before and after,
without going through the Store they are testing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def row_counts(path: str | Path) -> tuple[int, int]:
    """(conversations, messages) in the database at `path`."""
    conn = sqlite3.connect(path)
    try:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("conversations", "messages"))
    finally:
        conn.close()
