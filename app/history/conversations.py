"""Conversation rows: create, list, load, rename, soft delete and purge.

Deletion is soft (a `deleted_at` stamp) so the window can undo it; rows are
really removed only by `purge_deleted`, which opening the store runs for
anything deleted long enough ago.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from app.engine.stats import ReplyStats
from app.history import tree
from app.history.connection import MAX_ID, StoreBase
from app.history.doc_rows import attachments_from_json, docs_from_json
from app.history.errors import ConversationNotFound
from app.history.records import FORMATS, ConversationSummary, StoredConversation, StoredMessage
from app.history.tool_rows import calls_from_json

log = logging.getLogger("llamadesk.store")


class ConversationRows(StoreBase):
    def create_conversation(self, title: str = "", system_prompt: str | None = None,
                            model: str | None = None, settings: dict | None = None,
                            created_at: float | None = None) -> int:
        now = time.time() if created_at is None else created_at
        with self._write() as c:
            return insert_conversation(c, title.strip(), now, now, system_prompt, model, settings or {})

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

    def get_conversation(self, conv_id: int) -> StoredConversation:
        """The conversation with every message, its stats and context markers."""
        self._check_id(conv_id)
        with self._read() as c:
            row = c.execute(
                "SELECT id, title, created_at, updated_at, system_prompt, model, settings, reply_format, "
                "tools, active_leaf FROM conversations WHERE id = ? AND deleted_at IS NULL",
                (conv_id,)).fetchone()
            if row is None:
                raise ConversationNotFound(self.path, f"no conversation with id {conv_id}")
            rows = c.execute(
                "SELECT id, conversation_id, role, content, created_at, updated_at, state, stats, "
                "out_of_context, format, tool_calls, tool_call_id, tool_name, parent_id, edited, reasoning, "
                "tool_server, attachments, docs "
                "FROM messages WHERE conversation_id = ? ORDER BY id",
                (conv_id,)).fetchall()
        conv = StoredConversation(row[0], row[1], row[2], row[3], row[4], row[5],
                                  settings=json.loads(row[6] or "{}"), reply_format=_reply_format(row[7]),
                                  tools=_reply_format(row[8], "tools"), active_leaf=row[9])
        from_json = ReplyStats.from_json
        conv.tree = [
            StoredMessage(r[2], r[3], calls_from_json(r[10]), r[11], r[12], r[13], bool(r[14]), id=r[0],
                          conversation_id=r[1], created_at=r[4], updated_at=r[5], state=r[6],
                          stats=from_json(json.loads(r[7])) if r[7] else None, out_of_context=bool(r[8]),
                          format=r[9] if r[9] in FORMATS else None, reasoning=r[15], tool_server=r[16],
                          attachments=attachments_from_json(r[17]), docs=docs_from_json(r[18]))
            for r in rows
        ]
        conv.messages = tree.path_to(conv.tree, conv.active_leaf)
        return conv

    def show_branch(self, conv_id: int, msg_id: int) -> int:
        """Make the path through `msg_id` the one shown: down through the latest reply or version
        of each message after it. Returns the new active leaf."""
        with self._write() as c:
            self._require(c, conv_id)
            nodes = _nodes(c, conv_id)
            if msg_id not in {n.id for n in nodes}:
                raise ConversationNotFound(self.path, f"conversation {conv_id} has no message {msg_id}")
            leaf = tree.latest_leaf(nodes, msg_id) or msg_id
            c.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (leaf, conv_id))
            return leaf

    def delete_branch(self, conv_id: int, msg_id: int) -> int:
        """Delete `msg_id` and everything after it on every branch (the path shown moves to what
        is left beside it); returns how many messages went."""
        with self._write() as c:
            self._require(c, conv_id)
            nodes = _nodes(c, conv_id)
            gone = tree.subtree(nodes, msg_id) if msg_id in {n.id for n in nodes} else set()
            if not gone:
                raise ConversationNotFound(self.path, f"conversation {conv_id} has no message {msg_id}")
            parent = next(n.parent_id for n in nodes if n.id == msg_id)
            c.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in sorted(gone, reverse=True)])
            repair_leaf(c, conv_id, parent)
            return len(gone)

    def set_reply_format(self, conv_id: int, reply_format: dict | None) -> None:
        """The format chosen for the conversation's next replies (None: text), saved when chosen
        so that reopening the conversation before its next turn still finds it."""
        with self._write() as c:
            self._require(c, conv_id)
            c.execute("UPDATE conversations SET reply_format = ? WHERE id = ?",
                      (_reply_format_json(reply_format), conv_id))

    def set_tools(self, conv_id: int, tools: dict | None) -> None:
        """The tools the conversation's next turns may call (None: none), saved when chosen."""
        with self._write() as c:
            self._require(c, conv_id)
            c.execute("UPDATE conversations SET tools = ? WHERE id = ?", (_reply_format_json(tools), conv_id))

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
        if not 1 <= conv_id <= MAX_ID:
            raise ConversationNotFound(self.path, f"no deleted conversation with id {conv_id} to restore")
        with self._write() as c:
            n = c.execute("UPDATE conversations SET deleted_at = NULL "
                          "WHERE id = ? AND deleted_at IS NOT NULL", (conv_id,)).rowcount
            if n == 0:
                raise ConversationNotFound(self.path, f"no deleted conversation with id {conv_id} to restore")

    def discard_conversation(self, conv_id: int) -> None:
        """Delete at once, with no undo: for rolling back a conversation that
        never got a turn, not for the user's delete (that is `delete_conversation`)."""
        if not 1 <= conv_id <= MAX_ID:
            return
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


@dataclass
class _Node:
    id: int
    parent_id: int | None


def _nodes(c, conv_id: int) -> list[_Node]:
    return [_Node(*r) for r in c.execute("SELECT id, parent_id FROM messages WHERE conversation_id = ?",
                                         (conv_id,))]


def repair_leaf(c, conv_id: int, parent: int | None) -> None:
    """After a deletion: if the path shown ended in what went, it ends where `parent` leads now."""
    row = c.execute("SELECT active_leaf FROM conversations WHERE id = ?", (conv_id,)).fetchone()
    if row is None:
        return
    if row[0] is not None and c.execute("SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?",
                                        (row[0], conv_id)).fetchone():
        return
    nodes = _nodes(c, conv_id)
    leaf = tree.latest_leaf(nodes, parent if parent in {n.id for n in nodes} else None)
    c.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (leaf, conv_id))


def insert_conversation(c, title: str, created: float, updated: float, system_prompt: str | None,
                        model: str | None, settings: dict, reply_format: dict | None = None,
                        tools: dict | None = None) -> int:
    cur = c.execute(
        "INSERT INTO conversations (title, created_at, updated_at, system_prompt, model, settings, "
        "reply_format, tools) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (title, created, updated, system_prompt, model, json.dumps(settings),
         _reply_format_json(reply_format), _reply_format_json(tools)))
    return cur.lastrowid


def _reply_format_json(reply_format: dict | None) -> str | None:
    """A reply format's or a tool set's column: a JSON object, or NULL."""
    if reply_format is not None and not isinstance(reply_format, dict):
        raise ValueError("a reply format or a tool set is a JSON object or None")
    return json.dumps(reply_format, ensure_ascii=False) if reply_format is not None else None


def _reply_format(text: str | None, what: str = "reply format") -> dict | None:
    """The stored reply format (or tools); one a hand edit broke reads as none (text, no tools),
    said in the log, so the conversation still opens."""
    if text is None:
        return None
    try:
        d = json.loads(text)
    except ValueError:
        d = None
    if not isinstance(d, dict):
        log.warning("a conversation's stored %s is not a JSON object; it is left unused", what)
        return None
    return d
