"""The conversation history: one SQLite file shared by the window and the CLI.

Why it is built the way it is:
- WAL plus a busy timeout and BEGIN IMMEDIATE for every write, so the window
  and a `llamadesk ask` in a terminal can write at the same time and neither
  loses a row (readers never block, writers queue instead of failing).
- A reply is a row from its first token (messages), so a crash loses
  at most what was generated since the last save, and the next open marks
  the cut-off reply "interrupted" instead of dropping it.
- A file SQLite opened and found damaged is moved aside (never deleted) and a
  fresh one started, so a damaged history never stops the app from opening. A
  healthy file that merely cannot be opened (permissions, a read-only folder,
  too few file descriptors, a full disk) is never moved: that is reported in
  one line, and where only writing is impossible the history is still readable
  (`writable=False`). A file from a newer LlamaDesk is refused untouched
  (opening, db_file).
- One connection guarded by a lock, usable from any thread (connection).

`Store` is assembled from one part per kind of row, so each part can be read
alone; this module only opens it. Never imports Qt.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from app import paths
from app.history import tree
from app.history.conversations import ConversationRows
from app.history.db_file import NotWritable, diagnose
from app.history.documents import DocumentRows
from app.history.errors import ConversationNotFound, StoreError, StoreUnavailableError
from app.history.messages import MessageRows, make_title
from app.history.opening import connect_or_move_aside, connect_read_only
from app.history.search import MessageSearch

__all__ = ["DB_NAME", "Store", "default_path", "make_title"]

log = logging.getLogger("llamadesk.store")

DB_NAME = "llamadesk.db"
PURGE_AFTER_S = 7 * 24 * 3600  # soft-deleted conversations are kept this long


def default_path() -> Path:
    return paths.data_dir() / DB_NAME


class Store(DocumentRows, ConversationRows, MessageRows, MessageSearch):
    """Open with `Store.open()`; close it (or use `with`) when done."""

    def fork(self, conv_id: int, msg_id: int) -> int:
        """A new conversation holding the path up to `msg_id` (on any branch), with the system
        prompt, settings, reply format and tools, titled after the one it came from; its id."""
        conv = self.get_conversation(conv_id)
        path = tree.path_to(conv.tree, msg_id)
        if not path or path[-1].id != msg_id:
            raise ConversationNotFound(self.path, f"conversation {conv_id} has no message {msg_id}")
        conv.messages, conv.tree, conv.active_leaf = path, [], None
        conv.title = f"{conv.title} (fork)" if conv.title else "Fork"
        conv.created_at = conv.updated_at = time.time()
        return self.import_conversation(conv)

    @classmethod
    def open(cls, path: str | Path | None = None, *, check: bool = True, writable: bool = True) -> Store:
        """Open (creating or migrating) the database; see the module docstring.

        `writable=False` is for commands that only read: where the file cannot be
        written they get it read-only (`read_only`, and `notice` says why) instead
        of an error, and a failed recovery write does not stop them reading.
        Raises StoreVersionError for a database this LlamaDesk did not write and
        StoreUnavailableError when the file cannot be used (it is left as it is).
        """
        path = Path(path) if path is not None else _default_path()
        try:
            conn, fts, moved, why = connect_or_move_aside(path, check)
        except NotWritable as e:
            return cls._read_only(path, check, writable, e.reason.removeprefix(_CANNOT_OPEN), e)
        if not os.access(path, os.W_OK):  # SQLite quietly opened it read-only: say so now, not mid-turn
            conn.close()
            return cls._read_only(path, check, writable, diagnose(path)[0] or "the file is read-only")
        store = cls(conn, path, fts)
        if moved is not None:
            store.moved_to = moved
            store.notice = (f"{path}: the history database was damaged ({why}); "
                            f"moved it to {moved} and started a new one")
            log.warning("%s", store.notice)
        try:
            store.recovered = store.recover_interrupted()
            store.purge_deleted(older_than_s=PURGE_AFTER_S)
        except StoreError as e:
            if writable:
                store.close()
                raise
            log.warning("could not tidy the history (reading it anyway): %s", e)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _read_only(cls, path: Path, check: bool, writable: bool, why: str,
                   cause: Exception | None = None) -> Store:
        if writable:
            raise StoreUnavailableError(path, f"the history cannot be saved: {why}") from cause
        conn, fts, notice = connect_read_only(path, check, why)
        store = cls(conn, path, fts)
        store.read_only, store.notice = True, notice
        log.warning("%s", notice)
        return store


_CANNOT_OPEN = "cannot open the history database: "


def _default_path() -> Path:
    try:
        return default_path()
    except OSError as e:  # the data folder itself cannot be made
        raise StoreUnavailableError(e.filename or paths.APP_NAME,
                                    f"cannot create the history folder: {e.strerror or e}") from e
