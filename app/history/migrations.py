"""The store's schema, as forward-only steps keyed by PRAGMA user_version.

A database at version N gets steps N+1.. applied in one write transaction, so
a crash or a second process never sees half a migration. The v1 step is kept
verbatim (never edited) so that databases written by the first release, and
the tests' v1 fixtures, migrate exactly as users' files will.

The full-text index is not a numbered step: FTS5 is an optional SQLite module,
so it is created (and rebuilt from the messages) whenever the running SQLite
has it and the index is missing, and search falls back to LIKE otherwise.
"""

from __future__ import annotations

import sqlite3

V1 = [
    """CREATE TABLE conversations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        system_prompt TEXT,
        model TEXT,
        settings TEXT NOT NULL DEFAULT '{}'
    )""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL,
        created_at REAL NOT NULL,
        stats TEXT
    )""",
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)",
]

# v2: crash-safe replies (state, updated_at), context-budget markers, and
# soft delete so the window can undo a deletion.
V2 = [
    "ALTER TABLE messages ADD COLUMN updated_at REAL",
    "UPDATE messages SET updated_at = created_at",
    "ALTER TABLE messages ADD COLUMN state TEXT NOT NULL DEFAULT 'complete' "
    "CHECK (state IN ('complete', 'generating', 'interrupted'))",
    "ALTER TABLE messages ADD COLUMN out_of_context INTEGER NOT NULL DEFAULT 0",
    # The process saving a "generating" reply: once it is gone, the reply was cut off.
    "ALTER TABLE messages ADD COLUMN writer_pid INTEGER",
    "CREATE INDEX messages_generating ON messages(state) WHERE state = 'generating'",
    "ALTER TABLE conversations ADD COLUMN deleted_at REAL",
    "CREATE INDEX conversations_by_update ON conversations(deleted_at, updated_at)",
]

# v3: structured replies. A conversation's reply format, as the window's chooser keeps it (JSON:
# text, any JSON or a JSON schema; NULL reads as text, which every older conversation is), and
# what each reply was held to ("json"; NULL: Markdown text), so it is drawn as what it is.
V3 = [
    "ALTER TABLE conversations ADD COLUMN reply_format TEXT",
    "ALTER TABLE messages ADD COLUMN format TEXT",
]

# v4: tool calls. SQLite cannot change a CHECK, so the messages table is built again with
# 'tool' among the roles (the SQLite-documented way: a new table, copy, drop, rename, in the
# migration's one transaction); its indexes are made again, and the search triggers, which went
# with the old table, are made again by ensure_search_index in the same transaction, which
# rebuilds the index. An assistant row's `tool_calls` is a JSON list of {id, name, arguments}
# (arguments: the JSON text the model wrote); a tool row names the call it answers and the tool.
# A conversation's `tools` is its Tools chooser (app.chat.tool_set reads it; NULL: no tools).
V4 = [
    """CREATE TABLE messages_v4 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT NOT NULL,
        created_at REAL NOT NULL,
        stats TEXT,
        updated_at REAL,
        state TEXT NOT NULL DEFAULT 'complete' CHECK (state IN ('complete', 'generating', 'interrupted')),
        out_of_context INTEGER NOT NULL DEFAULT 0,
        writer_pid INTEGER,
        format TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT
    )""",
    "INSERT INTO messages_v4 (id, conversation_id, role, content, created_at, stats, updated_at, state, "
    "out_of_context, writer_pid, format) SELECT id, conversation_id, role, content, created_at, stats, "
    "updated_at, state, out_of_context, writer_pid, format FROM messages",
    # AUTOINCREMENT's high-water mark goes with the rows: a deleted last id is never reused.
    "DELETE FROM sqlite_sequence WHERE name = 'messages_v4'",
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'messages_v4', seq FROM sqlite_sequence "
    "WHERE name = 'messages'",
    "DROP TABLE messages",
    "ALTER TABLE messages_v4 RENAME TO messages",
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)",
    "CREATE INDEX messages_generating ON messages(state) WHERE state = 'generating'",
    "ALTER TABLE conversations ADD COLUMN tools TEXT",
]

# v5: conversations are trees. A message's parent is the message it follows (NULL: the first of its
# conversation); an edited question or a regenerated reply is a sibling of the one it replaces,
# which stays. Deleting a message deletes what follows it (its branch). Every earlier message
# follows the one before it in its conversation, as it did in the line they were. A conversation's
# active_leaf is the last message of the path shown (NULL: its latest message's); `edited` marks a
# reply the user rewrote.
V5 = [
    "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE",
    "UPDATE messages SET parent_id = (SELECT max(p.id) FROM messages p "
    "WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id)",
    "CREATE INDEX messages_by_parent ON messages(parent_id)",
    "ALTER TABLE messages ADD COLUMN edited INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE conversations ADD COLUMN active_leaf INTEGER",
    "UPDATE conversations SET active_leaf = (SELECT max(m.id) FROM messages m "
    "WHERE m.conversation_id = conversations.id)",
]

# v6: thinking models. A reply's reasoning (what a thinking model wrote before its answer) is
# kept apart from its content, the answer ('': none, which every earlier message is). The search
# index gains it as a second column, so a search can look in the answers alone or in the
# reasoning too: the old index's triggers are dropped here, and ensure_search_index, in the same
# transaction, makes the index again with both columns and rebuilds it (as v4 does). Where this
# SQLite has no FTS5 the old index table stays until an open that has it rebuilds it.
V6 = [
    "DROP TRIGGER IF EXISTS messages_fts_ai",
    "DROP TRIGGER IF EXISTS messages_fts_ad",
    "DROP TRIGGER IF EXISTS messages_fts_au",
    "ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''",
]

# v7: MCP tools and documents. A tool row answered by an MCP server names it (`tool_server`); a
# user row's `attachments` is a JSON list of the documents given with it (app.engine.message
# Attachment), whose extracted text is kept once per hash in `documents`, so a conversation reopens
# with the words the model read; an assistant row's `docs` is a JSON DocsUse: whole or retrieved,
# and the numbered sources it was given. NULL: none, which every earlier message is. A text no
# message attaches any more is deleted with the last one that did (documents_gc).
V7 = [
    "ALTER TABLE messages ADD COLUMN tool_server TEXT",
    "ALTER TABLE messages ADD COLUMN attachments TEXT",
    "ALTER TABLE messages ADD COLUMN docs TEXT",
    """CREATE TABLE documents (
        sha256 TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        pages INTEGER NOT NULL DEFAULT 0,
        text TEXT NOT NULL,
        page_starts TEXT,
        created_at REAL NOT NULL
    )""",
    # A document's text goes with the last message that attached it (a deleted branch, a purged
    # or discarded conversation, whose messages cascade): what a user deleted is not kept.
    """CREATE TRIGGER documents_gc AFTER DELETE ON messages WHEN old.attachments IS NOT NULL BEGIN
        DELETE FROM documents
        WHERE sha256 IN (SELECT json_extract(value, '$.sha256') FROM json_each(old.attachments))
        AND NOT EXISTS (SELECT 1 FROM messages m, json_each(m.attachments) j
                        WHERE m.attachments IS NOT NULL
                        AND json_extract(j.value, '$.sha256') = documents.sha256);
    END""",
]

STEPS = [V1, V2, V3, V4, V5, V6, V7]
CURRENT = len(STEPS)


def user_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, target: int = CURRENT) -> int:
    """Apply the missing steps up to `target`; the caller holds a write transaction."""
    version = user_version(conn)
    for n in range(version + 1, target + 1):
        for stmt in STEPS[n - 1]:
            conn.execute(stmt)
    if target > version:
        conn.execute(f"PRAGMA user_version = {int(target)}")
    return max(version, target)


FTS_TABLE = "messages_fts"
# The message text the index holds, oldest first: the answer (content), and from v6 the
# reasoning, as its own column so a search can name the one it looks in.
TEXT_COLUMNS = ("content", "reasoning")


def _fts(cols: tuple[str, ...]) -> list[str]:
    """The index over `cols` with the triggers that keep it in step with the messages."""
    names = ", ".join(cols)
    new, old = ", ".join(f"new.{c}" for c in cols), ", ".join(f"old.{c}" for c in cols)
    delete = f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, {names}) VALUES ('delete', old.id, {old});"
    insert = f"INSERT INTO {FTS_TABLE}(rowid, {names}) VALUES (new.id, {new});"
    return [
        # trigram: substring search (what a search box promises), case-insensitive.
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5({names}, content='messages', "
        "content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN {insert} END",
        f"CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN {delete} END",
        f"CREATE TRIGGER messages_fts_au AFTER UPDATE OF {names} ON messages BEGIN {delete} {insert} END",
        f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')",
    ]


def text_columns(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The text columns this file's messages have: an index built for an older schema (a test's
    fixture, a file migrated without FTS5) holds only those, as that version's LlamaDesk made it."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
    return tuple(c for c in TEXT_COLUMNS if c in have)


FTS_TRIGGERS = ("messages_fts_ai", "messages_fts_ad", "messages_fts_au")


def fts_available() -> bool:
    """Whether this Python's SQLite has FTS5 with the trigram tokenizer (3.34+)."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def ensure_search_index(conn: sqlite3.Connection, available: bool) -> bool:
    """Create the FTS index if this SQLite can; the caller holds a write transaction.

    Without FTS5 the triggers are dropped (they would make every insert fail
    with "no such module"); the stale table is rebuilt on a later open that has it.
    """
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    if not available:
        for t in FTS_TRIGGERS:
            if t in names:
                conn.execute(f"DROP TRIGGER {t}")
        return False
    if all(t in names for t in FTS_TRIGGERS):
        return True
    for t in FTS_TRIGGERS:
        if t in names:
            conn.execute(f"DROP TRIGGER {t}")
    if FTS_TABLE in names:
        conn.execute(f"DROP TABLE {FTS_TABLE}")
    for stmt in _fts(text_columns(conn)):
        conn.execute(stmt)
    return True


def needs_work(conn: sqlite3.Connection, available: bool) -> bool:
    """Cheap read-only check, so an up-to-date database opens without a write lock."""
    if user_version(conn) != CURRENT:
        return True
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    has = all(t in names for t in FTS_TRIGGERS)
    return has != available
