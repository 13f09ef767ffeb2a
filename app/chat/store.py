"""The conversation history: one SQLite file shared by the window and the CLI.

Why it is built the way it is:
- WAL plus a busy timeout and BEGIN IMMEDIATE for every write, so the window
  and a `llamadesk ask` in a terminal can write at the same time and neither
  loses a row (readers never block, writers queue instead of failing).
- A reply is a row from its first token: `begin_reply` creates it in state
  "generating", the caller saves the text as it grows, `finish_reply` seals
  it. A row still "generating" whose writer is gone was cut off by a crash and
  becomes "interrupted" on the next open, keeping its partial text.
- A file SQLite cannot read is moved aside (never deleted) and a fresh one
  started, so a damaged history never stops the app from opening; a file from
  a newer LlamaDesk is refused untouched.
- One connection guarded by a lock, usable from any thread: the window reads
  on the UI thread while its engine thread saves the growing reply.

Never imports Qt.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from app import paths
from app.chat import migrations
from app.chat.errors import ConversationNotFound, StoreError, StoreUnavailableError, StoreVersionError
from app.chat.records import (
    COMPLETE,
    GENERATING,
    INTERRUPTED,
    ROLES,
    STATES,
    Conversation,
    ConversationSummary,
    SearchHit,
    StoredMessage,
)
from app.chat.store_files import BadFile, classify, move_aside, pid_alive
from app.engine.stats import ReplyStats

log = logging.getLogger("llamadesk.store")

DB_NAME = "llamadesk.db"
BUSY_TIMEOUT_MS = 15_000  # a writer waits this long for another process's write
PURGE_AFTER_S = 7 * 24 * 3600  # soft-deleted conversations are kept this long
# A "generating" row whose writer process is alive is left alone unless its
# writer has not saved for this long (a hung writer, or a reused pid).
STALE_AFTER_S = 60.0
TITLE_MAX = 60

def default_path() -> Path:
    return paths.data_dir() / DB_NAME


def make_title(text: str) -> str:
    """A conversation's title from its first message: first line, shortened."""
    line = " ".join(text.strip().split("\n", 1)[0].split())
    return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "…"


class Store:
    """Open with `Store.open()`; close it (or use `with`) when done."""

    def __init__(self, conn: sqlite3.Connection, path: Path, fts: bool):
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        self.fts = fts  # full-text index in use (else search scans with LIKE)
        self.moved_to: Path | None = None  # where an unreadable database went
        self.notice: str | None = None  # one line to show the user, if any
        self.recovered = 0  # replies marked interrupted when this store opened

    # --- opening -----------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None, *, check: bool = True) -> Store:
        """Open (creating or migrating) the database; see the module docstring.

        Raises StoreVersionError for a newer database and StoreUnavailableError
        when the file can be neither opened nor moved aside.
        """
        path = Path(path) if path is not None else default_path()
        moved, why = None, None
        try:
            store = cls._open(path, check)
        except BadFile as bad:
            moved, why = move_aside(path, bad.reason), bad.reason
            try:
                store = cls._open(path, check)
            except BadFile as again:
                raise StoreUnavailableError(
                    path, f"a new history database is unusable too: {again}") from again
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

    @classmethod
    def _open(cls, path: Path, check: bool) -> Store:
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
            fts = cls._prepare(conn, path, check)
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, fts)

    @staticmethod
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
            return available
        except sqlite3.Error as e:
            raise classify(path, e) from e

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise StoreError(self.path, "the history store is closed")
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise StoreError(self.path, f"database error: {e}") from e

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: takes the write lock up front so a
        concurrent writer waits (busy timeout) instead of failing mid-way."""
        with self._read() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _require(self, conn: sqlite3.Connection, conv_id: int) -> None:
        row = conn.execute("SELECT 1 FROM conversations WHERE id = ? AND deleted_at IS NULL",
                           (conv_id,)).fetchone()
        if row is None:
            raise ConversationNotFound(self.path, f"no conversation with id {conv_id}")

    # --- conversations -----------------------------------------------------

    def create_conversation(self, title: str = "", system_prompt: str | None = None,
                            model: str | None = None, settings: dict | None = None,
                            created_at: float | None = None) -> int:
        now = time.time() if created_at is None else created_at
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO conversations (title, created_at, updated_at, system_prompt, model, settings) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (title.strip(), now, now, system_prompt, model, json.dumps(settings or {})))
            return cur.lastrowid

    def list_conversations(self, limit: int | None = None) -> list[ConversationSummary]:
        """Newest activity first, deleted ones left out."""
        sql = ("SELECT c.id, c.title, c.created_at, c.updated_at, "
               "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.model "
               "FROM conversations c WHERE c.deleted_at IS NULL ORDER BY c.updated_at DESC, c.id DESC")
        args: tuple = ()
        if limit is not None:
            sql += " LIMIT ?"
            args = (limit,)
        with self._read() as c:
            return [ConversationSummary(*row) for row in c.execute(sql, args)]

    def get_conversation(self, conv_id: int) -> Conversation:
        """The conversation with every message, its stats and context markers."""
        with self._read() as c:
            row = c.execute(
                "SELECT id, title, created_at, updated_at, system_prompt, model, settings "
                "FROM conversations WHERE id = ? AND deleted_at IS NULL", (conv_id,)).fetchone()
            if row is None:
                raise ConversationNotFound(self.path, f"no conversation with id {conv_id}")
            rows = c.execute(
                "SELECT id, conversation_id, role, content, created_at, updated_at, state, stats, "
                "out_of_context FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,)).fetchall()
        conv = Conversation(*row[:6], settings=json.loads(row[6] or "{}"))
        from_json = ReplyStats.from_json
        conv.messages = [
            StoredMessage(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                          from_json(json.loads(r[7])) if r[7] else None, bool(r[8]))
            for r in rows
        ]
        return conv

    def rename_conversation(self, conv_id: int, title: str) -> None:
        title = " ".join(title.split())
        if not title:
            raise ValueError("a conversation title cannot be empty")
        with self._write() as c:
            self._require(c, conv_id)
            c.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conv_id))

    def update_conversation(self, conv_id: int, *, system_prompt: str | None = None,
                            model: str | None = None, settings: dict | None = None) -> None:
        """Record what the latest turn used; None leaves a field as it was."""
        sets, args = [], []
        for col, val in (("system_prompt", system_prompt), ("model", model)):
            if val is not None:
                sets.append(f"{col} = ?")
                args.append(val)
        if settings is not None:
            sets.append("settings = ?")
            args.append(json.dumps(settings))
        with self._write() as c:
            self._require(c, conv_id)
            if sets:
                c.execute(f"UPDATE conversations SET {', '.join(sets)} WHERE id = ?", (*args, conv_id))

    def delete_conversation(self, conv_id: int) -> None:
        """Hide it from every listing; `restore_conversation` undoes this until it is purged."""
        with self._write() as c:
            self._require(c, conv_id)
            c.execute("UPDATE conversations SET deleted_at = ? WHERE id = ?", (time.time(), conv_id))

    def restore_conversation(self, conv_id: int) -> None:
        with self._write() as c:
            n = c.execute("UPDATE conversations SET deleted_at = NULL "
                          "WHERE id = ? AND deleted_at IS NOT NULL", (conv_id,)).rowcount
            if n == 0:
                raise ConversationNotFound(self.path, f"no deleted conversation with id {conv_id} to restore")

    def discard_conversation(self, conv_id: int) -> None:
        """Delete at once, with no undo: for rolling back a conversation that
        never got a turn, not for the user's delete (that is `delete_conversation`)."""
        with self._write() as c:
            c.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))

    def purge_deleted(self, older_than_s: float = 0.0) -> int:
        """Really delete conversations soft-deleted at least `older_than_s` ago."""
        cutoff = time.time() - older_than_s
        with self._read() as c:
            row = c.execute("SELECT 1 FROM conversations WHERE deleted_at <= ? LIMIT 1", (cutoff,)).fetchone()
        if row is None:
            return 0
        with self._write() as c:
            return c.execute("DELETE FROM conversations WHERE deleted_at <= ?", (cutoff,)).rowcount

    # --- messages ----------------------------------------------------------

    def add_message(self, conv_id: int, role: str, content: str, *, stats: ReplyStats | None = None,
                    state: str = COMPLETE, out_of_context: bool = False,
                    created_at: float | None = None, updated_at: float | None = None) -> int:
        """Append a message; the first user message names an untitled conversation."""
        if role not in ROLES:
            raise ValueError(f"unknown message role {role!r}")
        if state not in STATES:
            raise ValueError(f"unknown message state {state!r}")
        now = time.time()
        created = now if created_at is None else created_at
        with self._write() as c:
            self._require(c, conv_id)
            mid = self._insert(c, conv_id, role, content, stats, state, out_of_context, created,
                               created if updated_at is None else updated_at)
            c.execute("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", (now, conv_id))
            if role == "user":
                c.execute("UPDATE conversations SET title = ? WHERE id = ? AND title = ''",
                          (make_title(content), conv_id))
            return mid

    @staticmethod
    def _insert(c, conv_id, role, content, stats, state, out_of_context, created, updated) -> int:
        cur = c.execute(
            "INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state, stats, "
            "out_of_context, writer_pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conv_id, role, content, created, updated, state,
             json.dumps(stats.to_json()) if stats is not None else None, int(out_of_context),
             os.getpid() if state == GENERATING else None))
        return cur.lastrowid

    def begin_reply(self, conv_id: int) -> int:
        """An empty assistant message in state "generating"; save its text with `update_reply`."""
        return self.add_message(conv_id, "assistant", "", state=GENERATING)

    def update_reply(self, msg_id: int, text: str) -> None:
        """Save the reply so far (and prove its writer is alive). The caller
        saves at least once a second: that bounds what a crash can lose."""
        with self._write() as c:
            c.execute("UPDATE messages SET content = ?, updated_at = ?, writer_pid = ? WHERE id = ?",
                      (text, time.time(), os.getpid(), msg_id))

    def finish_reply(self, msg_id: int, text: str, stats: ReplyStats | None, *,
                     state: str = COMPLETE, out_of_context: Iterable[int] | None = None) -> None:
        """Seal a reply. `out_of_context` (message ids the context budget left
        out of this reply's prompt) replaces the conversation's markers."""
        if state not in (COMPLETE, INTERRUPTED):
            raise ValueError(f"a finished reply is complete or interrupted, not {state!r}")
        now = time.time()
        with self._write() as c:
            row = c.execute("SELECT conversation_id FROM messages WHERE id = ?", (msg_id,)).fetchone()
            if row is None:
                raise StoreError(self.path, f"no message with id {msg_id}")
            c.execute("UPDATE messages SET content = ?, updated_at = ?, state = ?, stats = ?, "
                      "writer_pid = NULL WHERE id = ?",
                      (text, now, state, json.dumps(stats.to_json()) if stats is not None else None, msg_id))
            c.execute("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", (now, row[0]))
            if out_of_context is not None:
                self._mark(c, row[0], out_of_context)

    def set_out_of_context(self, conv_id: int, message_ids: Iterable[int]) -> None:
        """Mark exactly these messages as outside the context (all others inside)."""
        with self._write() as c:
            self._require(c, conv_id)
            self._mark(c, conv_id, message_ids)

    @staticmethod
    def _mark(c, conv_id: int, message_ids: Iterable[int]) -> None:
        ids = sorted(set(message_ids))
        c.execute("UPDATE messages SET out_of_context = 0 WHERE conversation_id = ? AND out_of_context = 1",
                  (conv_id,))
        c.executemany("UPDATE messages SET out_of_context = 1 WHERE id = ? AND conversation_id = ?",
                      [(i, conv_id) for i in ids])

    def delete_message(self, msg_id: int) -> None:
        """Remove one message; used to roll back a turn that failed before any text."""
        with self._write() as c:
            c.execute("DELETE FROM messages WHERE id = ?", (msg_id,))

    def recover_interrupted(self) -> int:
        """Turn replies whose writer died (or went silent) into "interrupted"."""
        with self._read() as c:
            rows = c.execute("SELECT id, writer_pid, updated_at FROM messages WHERE state = ?",
                             (GENERATING,)).fetchall()
        now = time.time()
        dead = [r[0] for r in rows
                if r[1] is None or not pid_alive(r[1]) or now - (r[2] or 0) > STALE_AFTER_S]
        if not dead:
            return 0
        with self._write() as c:
            c.executemany("UPDATE messages SET state = ?, writer_pid = NULL WHERE id = ? AND state = ?",
                          [(INTERRUPTED, i, GENERATING) for i in dead])
        log.info("marked %d cut-off replies as interrupted", len(dead))
        return len(dead)

    # --- search ------------------------------------------------------------

    def search(self, query: str, limit: int = 100) -> list[SearchHit]:
        """Messages containing `query` (case-insensitive substring), newest conversations first."""
        q = query.strip()
        if not q:
            return []
        base = ("SELECT m.id, m.conversation_id, m.role, m.content, c.title FROM {src} "
                "JOIN conversations c ON c.id = m.conversation_id "
                "WHERE {cond} AND c.deleted_at IS NULL ORDER BY c.updated_at DESC, m.id LIMIT ?")
        if self.fts and len(q) >= 3:  # trigrams need three characters
            sql = base.format(src=f"{migrations.FTS_TABLE} f JOIN messages m ON m.id = f.rowid",
                              cond=f"{migrations.FTS_TABLE} MATCH ?")
            arg = '"' + q.replace('"', '""') + '"'
        else:
            sql = base.format(src="messages m", cond="m.content LIKE ? ESCAPE '\\'")
            arg = "%" + re.sub(r"([%_\\])", r"\\\1", q) + "%"
        with self._read() as c:
            rows = c.execute(sql, (arg, limit)).fetchall()
        return [SearchHit(r[1], r[4], r[0], r[2], snippet(r[3], q)) for r in rows]

    # --- import ------------------------------------------------------------

    def import_conversation(self, conv: Conversation) -> int:
        """Write a whole conversation in one transaction (all or nothing); returns its new id.

        A message still "generating" in the source has no writer here, so it
        arrives "interrupted".
        """
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO conversations (title, created_at, updated_at, system_prompt, model, settings) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (conv.title, conv.created_at, conv.updated_at, conv.system_prompt, conv.model,
                 json.dumps(conv.settings)))
            cid = cur.lastrowid
            for m in conv.messages:
                state = INTERRUPTED if m.state == GENERATING else m.state
                self._insert(c, cid, m.role, m.content, m.stats, state, m.out_of_context,
                             m.created_at, m.updated_at)
            return cid


def snippet(text: str, query: str, before: int = 40, after: int = 80) -> str:
    """One line of `text` around the first match of `query`, for a search result."""
    m = re.search(re.escape(query), text, re.IGNORECASE)
    start = m.start() if m else 0
    lo, hi = max(0, start - before), min(len(text), start + len(query) + after)
    out = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + out + ("…" if hi < len(text) else "")
