"""Message rows, and replies saved from their first token.

A reply is a row from the start: `begin_reply` creates it in state
"generating", the caller saves the text as it grows, `finish_reply` seals it.
A thinking model's reasoning is saved beside the text, in its own column, the
same way and in the same writes, so a crash keeps as much of one as of the other.
A row still "generating" whose writer is gone was cut off by a crash;
`recover_interrupted` turns it "interrupted", keeping its partial text.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Sequence

from app.engine.message import Attachment, DocsUse, MessageBody, ToolCall
from app.engine.stats import ReplyStats
from app.history.connection import MAX_ID, StoreBase
from app.history.conversations import insert_conversation, repair_leaf
from app.history.db_file import pid_alive
from app.history.doc_rows import attachments_json, docs_json
from app.history.errors import StoreError
from app.history.records import (
    COMPLETE,
    FORMATS,
    GENERATING,
    INTERRUPTED,
    STATES,
    StoredConversation,
)
from app.history.tool_rows import calls_json

log = logging.getLogger("llamadesk.store")

# A "generating" row whose writer process is alive is left alone unless its
# writer has not saved for this long (a hung writer, or a reused pid).
STALE_AFTER_S = 60.0
TITLE_MAX = 60
# A new message's parent by default: the last message of the path shown (the conversation's
# active leaf), so a caller that knows nothing of branches appends as it always did.
AT_LEAF = -1


def make_title(text: str) -> str:
    """A conversation's title from its first message: first line, shortened."""
    line = " ".join(text.strip().split("\n", 1)[0].split())
    return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "…"


def _stats_json(stats: ReplyStats | None) -> str | None:
    return json.dumps(stats.to_json()) if stats is not None else None


class MessageRows(StoreBase):
    def add_message(self, conv_id: int, role: str, content: str, *, stats: ReplyStats | None = None,
                    state: str = COMPLETE, out_of_context: bool = False,
                    created_at: float | None = None, updated_at: float | None = None,
                    tool_calls: Sequence[ToolCall] = (), tool_call_id: str | None = None,
                    tool_name: str | None = None, parent_id: int | None = AT_LEAF,
                    edited: bool = False, reasoning: str = "", tool_server: str | None = None,
                    attachments: Sequence[Attachment] = (), docs: DocsUse | None = None) -> int:
        """Append a message after `parent_id` (AT_LEAF: the path shown; None: a first message),
        and show the path it ends; the first user message names an untitled conversation. A
        "tool" message is a call's result: `tool_name` says whose, `tool_call_id` which call."""
        body = MessageBody(role, content, tuple(tool_calls), tool_call_id, tool_name, edited=edited,
                           reasoning=reasoning, tool_server=tool_server, attachments=tuple(attachments),
                           docs=docs)
        problem = body.problem()
        if problem:
            raise ValueError(problem)
        if state not in STATES:
            raise ValueError(f"unknown message state {state!r}")
        now = time.time()
        created = now if created_at is None else created_at
        with self._write() as c:
            self._require(c, conv_id)
            body.parent_id = _parent(c, conv_id, parent_id)
            mid = _insert(c, conv_id, body, stats, state, out_of_context, created,
                          created if updated_at is None else updated_at)
            _show(c, conv_id, mid)
            c.execute("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", (now, conv_id))
            if role == "user":
                c.execute("UPDATE conversations SET title = ? WHERE id = ? AND title = ''",
                          (make_title(content), conv_id))
            return mid

    def begin_turn(self, conv_id: int | None, user_text: str, *, system_prompt: str | None = None,
                   model: str | None = None, settings: dict | None = None,
                   reply_format: dict | None = None, reply_as: str | None = None,
                   tools: dict | None = None, parent_id: int | None = AT_LEAF) -> tuple[int, int, int]:
        """The first write of a turn, all or nothing: the conversation (new, or its
        system prompt, model, settings, reply format and tools brought up to date; None
        leaves one as it was), the question and the empty "generating" reply (held
        to `reply_as`, JSON_REPLY or None) in one transaction, so a failure (a full
        disk, text that cannot be stored) never leaves an untitled conversation
        without its question. The question follows `parent_id` (AT_LEAF: the path
        shown; an edited question follows what the one it replaces followed, and
        starts a branch beside it), and the path shown ends at the new reply.

        Returns (conversation id, question id, reply id).
        """
        for what, text in (("message", user_text), ("system prompt", system_prompt), ("model name", model)):
            if text is not None:
                _storable(self.path, text, what)
        if reply_as is not None and reply_as not in FORMATS:
            raise ValueError(f"unknown reply format {reply_as!r}")
        meta = json.dumps(settings) if settings is not None else None
        fmt = json.dumps(reply_format, ensure_ascii=False) if reply_format is not None else None
        tool_set = json.dumps(tools, ensure_ascii=False) if tools is not None else None
        title, now = make_title(user_text), time.time()
        with self._write() as c:
            if conv_id is None:
                conv_id = insert_conversation(c, title, now, now, system_prompt, model, settings or {},
                                              reply_format, tools)
            else:
                self._require(c, conv_id)
                c.execute(
                    "UPDATE conversations SET system_prompt = coalesce(?, system_prompt), "
                    "model = coalesce(?, model), settings = coalesce(?, settings), "
                    "reply_format = coalesce(?, reply_format), tools = coalesce(?, tools), "
                    "updated_at = max(updated_at, ?), title = CASE title WHEN '' THEN ? ELSE title END "
                    "WHERE id = ?", (system_prompt, model, meta, fmt, tool_set, now, title, conv_id))
            question = MessageBody("user", user_text, parent_id=_parent(c, conv_id, parent_id))
            user_id = _insert(c, conv_id, question, None, COMPLETE, False, now, now)
            reply_id = _insert(c, conv_id, MessageBody("assistant", "", parent_id=user_id), None, GENERATING,
                               False, now, now, reply_as)
            _show(c, conv_id, reply_id)
        return conv_id, user_id, reply_id

    def begin_reply(self, conv_id: int, parent_id: int | None = AT_LEAF) -> int:
        """An empty assistant message in state "generating"; save its text with `update_reply`.
        A turn that continues after tool results begins here: it has no question of its own;
        so does a regenerated reply, after its question (`parent_id`), beside the earlier ones."""
        return self.add_message(conv_id, "assistant", "", state=GENERATING, parent_id=parent_id)

    def update_reply(self, msg_id: int, text: str, reasoning: str | None = None) -> None:
        """Save the reply so far, its reasoning too (None: leave the saved reasoning), and prove
        its writer is alive. The caller saves at least once a second: that bounds what a crash
        can lose."""
        if not 1 <= msg_id <= MAX_ID:
            return
        with self._write() as c:
            c.execute("UPDATE messages SET content = ?, reasoning = coalesce(?, reasoning), updated_at = ?, "
                      "writer_pid = ? WHERE id = ?", (text, reasoning, time.time(), os.getpid(), msg_id))

    def finish_reply(self, msg_id: int, text: str, stats: ReplyStats | None, *,
                     state: str = COMPLETE, out_of_context: Iterable[int] | None = None,
                     tool_calls: Sequence[ToolCall] = (), fmt: str | None = None,
                     reasoning: str | None = None) -> None:
        """Seal a reply (with the tool calls it made, if any, and its reasoning: None keeps what
        was saved while it streamed). `out_of_context` (message ids the context budget left out
        of this reply's prompt) replaces the conversation's markers."""
        if state not in (COMPLETE, INTERRUPTED):
            raise ValueError(f"a finished reply is complete or interrupted, not {state!r}")
        if fmt is not None and fmt not in FORMATS:
            raise ValueError(f"unknown reply format {fmt!r}")
        now = time.time()
        with self._write() as c:
            row = (c.execute("SELECT conversation_id FROM messages WHERE id = ?", (msg_id,)).fetchone()
                   if 1 <= msg_id <= MAX_ID else None)
            if row is None:
                raise StoreError(self.path, f"no message with id {msg_id}")
            c.execute("UPDATE messages SET content = ?, reasoning = coalesce(?, reasoning), updated_at = ?, "
                      "state = ?, stats = ?, writer_pid = NULL, tool_calls = ?, format = coalesce(?, format) "
                      "WHERE id = ?",
                      (text, reasoning, now, state, _stats_json(stats), calls_json(tool_calls), fmt, msg_id))
            c.execute("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?", (now, row[0]))
            if out_of_context is not None:
                _mark(c, row[0], out_of_context)

    def set_out_of_context(self, conv_id: int, message_ids: Iterable[int]) -> None:
        """Mark exactly these messages as outside the context (all others inside)."""
        with self._write() as c:
            self._require(c, conv_id)
            _mark(c, conv_id, message_ids)

    def delete_message(self, msg_id: int) -> None:
        """Remove one message; used to roll back a turn that failed before any text."""
        if not 1 <= msg_id <= MAX_ID:
            return
        with self._write() as c:
            row = c.execute("SELECT conversation_id, parent_id FROM messages WHERE id = ?",
                            (msg_id,)).fetchone()
            c.execute("DELETE FROM messages WHERE id = ?", (msg_id,))
            if row is not None:
                repair_leaf(c, row[0], row[1])

    def recover_interrupted(self) -> int:
        """Turn replies whose writer died (or went silent) into "interrupted".

        One that had no text yet (nor reasoning: thinking shown is kept) showed nothing to
        anyone, so it is removed rather than kept as an empty reply; the question before it stays.
        """
        with self._read() as c:
            rows = c.execute("SELECT id, writer_pid, updated_at, content = '' AND reasoning = '', "
                             "conversation_id, parent_id FROM messages WHERE state = ?",
                             (GENERATING,)).fetchall()
        now = time.time()
        dead = [r for r in rows
                if r[1] is None or not pid_alive(r[1]) or now - (r[2] or 0) > STALE_AFTER_S]
        if not dead:
            return 0
        with self._write() as c:
            c.executemany("DELETE FROM messages WHERE id = ? AND state = ? "
                          "AND content = '' AND reasoning = ''",
                          [(r[0], GENERATING) for r in dead if r[3]])
            for r in dead:
                if r[3]:
                    repair_leaf(c, r[4], r[5])
            c.executemany("UPDATE messages SET state = ?, writer_pid = NULL WHERE id = ? AND state = ?",
                          [(INTERRUPTED, r[0], GENERATING) for r in dead if not r[3]])
        log.info("recovered %d cut-off replies (empty ones removed)", len(dead))
        return len(dead)

    def import_conversation(self, conv: StoredConversation) -> int:
        """Write a whole conversation in one transaction (all or nothing); returns its new id.

        A message still "generating" in the source has no writer here, so it
        arrives "interrupted". Its tree comes whole (`tree`, each message's parent
        among them, ids renumbered), or its `messages` as one line when it has no
        tree; the path shown is the one it showed.
        """
        rows = conv.tree or conv.messages
        with self._write() as c:
            cid = insert_conversation(c, conv.title, conv.created_at, conv.updated_at, conv.system_prompt,
                                      conv.model, conv.settings, conv.reply_format, conv.tools)
            new: dict[int, int] = {}
            last = None
            for m in rows:
                state = INTERRUPTED if m.state == GENERATING else m.state
                body = m.body()
                body.parent_id = (new.get(m.parent_id) if m.parent_id is not None else None) if conv.tree \
                    else last
                last = new[m.id] = _insert(c, cid, body, m.stats, state, m.out_of_context, m.created_at,
                                           m.updated_at, m.format)
            leaf = new.get(conv.active_leaf) if conv.tree and conv.active_leaf is not None else last
            _show(c, cid, leaf)
            return cid


def _storable(path, text: str, what: str) -> None:
    """Undecodable bytes reach Python as lone surrogates (a terminal's argv), which
    SQLite cannot store; saying so beats a codec error about "surrogates"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise StoreError(path, f"the {what} is not valid UTF-8 text (character {e.start + 1} comes from "
                               f"bytes that are not UTF-8); nothing was saved") from e


def _insert(c, conv_id, body: MessageBody, stats, state, out_of_context, created, updated,
            fmt=None) -> int:
    cur = c.execute(
        "INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state, stats, "
        "out_of_context, writer_pid, format, tool_calls, tool_call_id, tool_name, parent_id, edited, "
        "reasoning, tool_server, attachments, docs) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (conv_id, body.role, body.content, created, updated, state, _stats_json(stats), int(out_of_context),
         os.getpid() if state == GENERATING else None, fmt, calls_json(body.tool_calls), body.tool_call_id,
         body.tool_name, body.parent_id, int(body.edited), body.reasoning, body.tool_server,
         attachments_json(body.attachments), docs_json(body.docs)))
    return cur.lastrowid


def _parent(c, conv_id: int, parent_id: int | None) -> int | None:
    """The message a new one follows: AT_LEAF resolved to the path shown's last; a parent that is
    not this conversation's is refused (a branch never joins two conversations)."""
    if parent_id == AT_LEAF:
        row = c.execute("SELECT active_leaf FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        leaf = row[0] if row else None
        if leaf is not None and c.execute("SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?",
                                          (leaf, conv_id)).fetchone():
            return leaf
        row = c.execute("SELECT max(id) FROM messages WHERE conversation_id = ?", (conv_id,)).fetchone()
        return row[0] if row else None
    if parent_id is not None and not c.execute("SELECT 1 FROM messages WHERE id = ? AND conversation_id = ?",
                                               (parent_id, conv_id)).fetchone():
        raise ValueError(f"conversation {conv_id} has no message {parent_id} to follow")
    return parent_id


def _show(c, conv_id: int, leaf: int | None) -> None:
    c.execute("UPDATE conversations SET active_leaf = ? WHERE id = ?", (leaf, conv_id))


def _mark(c, conv_id: int, message_ids: Iterable[int]) -> None:
    ids = sorted(set(message_ids))
    c.execute("UPDATE messages SET out_of_context = 0 WHERE conversation_id = ? AND out_of_context = 1",
              (conv_id,))
    c.executemany("UPDATE messages SET out_of_context = 1 WHERE id = ? AND conversation_id = ?",
                  [(i, conv_id) for i in ids])
