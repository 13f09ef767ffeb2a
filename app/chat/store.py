"""The conversation history: one SQLite file shared by the window and the CLI.

Why it is built the way it is:
- WAL plus a busy timeout and BEGIN IMMEDIATE for every write, so the window
  and a `llamadesk ask` in a terminal can write at the same time and neither
  loses a row (readers never block, writers queue instead of failing).
- A reply is a row from its first token (store_messages), so a crash loses
  at most what was generated since the last save, and the next open marks
  the cut-off reply "interrupted" instead of dropping it.
- A file SQLite cannot read is moved aside (never deleted) and a fresh one
  started, so a damaged history never stops the app from opening; a file from
  a newer LlamaDesk is refused untouched (store_open, store_files).
- One connection guarded by a lock, usable from any thread (store_base).

`Store` is assembled from one part per kind of row, so each part can be read
alone; this module only opens it. Never imports Qt.
"""

from __future__ import annotations

import logging
from pathlib import Path

from app import paths
from app.chat.store_conversations import ConversationRows
from app.chat.store_messages import MessageRows, make_title
from app.chat.store_open import connect_or_move_aside
from app.chat.store_search import MessageSearch

__all__ = ["DB_NAME", "Store", "default_path", "make_title"]

log = logging.getLogger("llamadesk.store")

DB_NAME = "llamadesk.db"
PURGE_AFTER_S = 7 * 24 * 3600  # soft-deleted conversations are kept this long


def default_path() -> Path:
    return paths.data_dir() / DB_NAME


class Store(ConversationRows, MessageRows, MessageSearch):
    """Open with `Store.open()`; close it (or use `with`) when done."""

    @classmethod
    def open(cls, path: str | Path | None = None, *, check: bool = True) -> Store:
        """Open (creating or migrating) the database; see the module docstring.

        Raises StoreVersionError for a newer database and StoreUnavailableError
        when the file can be neither opened nor moved aside.
        """
        path = Path(path) if path is not None else default_path()
        conn, fts, moved, why = connect_or_move_aside(path, check)
        store = cls(conn, path, fts)
        if moved is not None:
            store.moved_to = moved
            store.notice = (f"{path}: the history database was unreadable ({why}); "
                            f"moved it to {moved} and started a new one")
            log.warning("%s", store.notice)
        try:
            store.recovered = store.recover_interrupted()
            store.purge_deleted(older_than_s=PURGE_AFTER_S)
        except BaseException:
            store.close()
            raise
        return store
