"""A reply's reasoning in the store (schema v6): a v5 file migrates in one step keeping ids, the
tree and search; every write path keeps the reasoning apart from the answer, a crash keeps it,
and its stats figures round-trip. Real SQLite under the test's XDG data dir."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.stats import ReplyStats
from app.history import migrations
from app.history.errors import StoreError
from app.history.records import COMPLETE, GENERATING, INTERRUPTED
from app.history.store import Store, default_path

ROOT = Path(__file__).resolve().parents[2]


def stats(**kw) -> ReplyStats:
    base = dict(ttft_s=0.1, prefill_tokens=12, cached_tokens=0, prefill_s=0.01, prefill_tok_s=1200.0,
                decode_tokens=40, decode_s=0.4, decode_tok_s=100.0, total_s=0.6, kv_used=52, n_ctx=4096,
                stop_reason="stop")
    return ReplyStats(**{**base, **kw})


def make_v5(path: Path) -> None:
    """A v5 history as the v5 schema and its search index leave it: two conversations, one with a
    regenerated reply beside the first (a branch), every row sealed."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=5)
    migrations.ensure_search_index(conn, migrations.fts_available())
    for title in ("capitals", "other"):
        conn.execute("INSERT INTO conversations (title, created_at, updated_at, settings) "
                     "VALUES (?, 1.0, 2.0, '{}')", (title,))
    rows = [  # (conversation, role, text, parent)
        (1, "user", "capital of France?", None),      # 1
        (2, "user", "other question", None),          # 2
        (1, "assistant", "Lyon, I think", 1),         # 3: the first reply
        (1, "assistant", "Paris", 1),                 # 4: regenerated beside it
        (2, "assistant", "other answer", 2),          # 5
    ]
    for cid, role, text, parent in rows:
        conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state, "
                     "parent_id) VALUES (?, ?, ?, 1.0, 1.0, 'complete', ?)", (cid, role, text, parent))
    conn.execute("UPDATE conversations SET active_leaf = 4 WHERE id = 1")
    conn.execute("UPDATE conversations SET active_leaf = 5 WHERE id = 2")
    conn.execute("COMMIT")
    conn.close()


def fts_columns(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({migrations.FTS_TABLE})")]
    finally:
        conn.close()


def check_index(s: Store) -> None:
    """FTS5's own check that the index holds exactly what the triggers were told (a 'delete' with
    the wrong old values would break it)."""
    if s.fts:
        fts = migrations.FTS_TABLE
        with s._write() as c:
            c.execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")


def test_a_v5_file_migrates_to_v6_keeping_ids_the_tree_and_search():
    path = default_path()
    make_v5(path)
    if migrations.fts_available():
        assert fts_columns(path) == ["content"], "the fixture is a v5 file with v5's index"

    with Store.open() as s:
        conv = s.get_conversation(1)
        assert [(m.id, m.parent_id, m.content) for m in conv.tree] == \
               [(1, None, "capital of France?"), (3, 1, "Lyon, I think"), (4, 1, "Paris")]
        assert conv.active_leaf == 4 and [m.id for m in conv.messages] == [1, 4]
        assert conv.alternatives(conv.messages[-1]) == [3, 4]
        assert all(m.reasoning == "" for m in conv.tree + s.get_conversation(2).tree)
        if s.fts:
            assert [h.message_id for h in s.search("Lyon")] == [3]
            assert sorted(h.message_id for h in s.search("other")) == [2, 5]
        # The migrated file takes a reply with reasoning, found only when asked.
        _c, _q, r = s.begin_turn(1, "and of Italy?")
        s.finish_reply(r, "Rome.", None, reasoning="Italy's capital is Rome, not Milan.")
        assert s.get_conversation(1).messages[-1].reasoning == "Italy's capital is Rome, not Milan."
        assert s.search("Milan") == []
        assert [h.message_id for h in s.search("Milan", include_reasoning=True)] == [r]
        check_index(s)
    if migrations.fts_available():
        assert fts_columns(path) == ["content", "reasoning"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT >= 6
        cols = {r[1]: r for r in conn.execute("PRAGMA table_info(messages)")}
        assert cols["reasoning"][2] == "TEXT" and cols["reasoning"][3] == 1 and cols["reasoning"][4] == "''"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()[0] == 7
    finally:
        conn.close()


def test_a_migration_that_fails_leaves_the_v5_file_as_it_was():
    """All or nothing: a v5 file that (hand-edited) already has a `reasoning` column fails v6
    after it dropped the search triggers; they are all still there, and the version is 5."""
    path = default_path()
    make_v5(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT")
    before = conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    conn.close()
    if migrations.fts_available():
        assert {("messages_fts_ai",), ("messages_fts_au",)} <= set(before)
    with pytest.raises(StoreError, match="duplicate column name: reasoning"):
        Store.open(path).close()
    conn = sqlite3.connect(path)  # left where it was, untouched
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == before
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 5
    finally:
        conn.close()


def test_a_v5_file_migrated_without_fts5_gets_the_new_index_on_a_later_open(monkeypatch):
    """Where the SQLite at migration time has no FTS5 the old index stays behind; the next open
    with FTS5 replaces it with the two-column one, and search in the reasoning works either way."""
    if not migrations.fts_available():
        pytest.skip("this SQLite has no FTS5 trigram tokenizer")
    path = default_path()
    make_v5(path)
    with monkeypatch.context() as m:
        m.setattr(migrations, "fts_available", lambda: False)
        with Store.open() as s:
            assert not s.fts
            _c, _q, r = s.begin_turn(1, "and of Spain?")
            s.finish_reply(r, "Madrid.", None, reasoning="Spain: Madrid, not Barcelona.")
            assert [h.message_id for h in s.search("barcelona", include_reasoning=True)] == [r]
            assert s.search("barcelona") == []
    with Store.open() as s:
        assert s.fts
        assert [h.message_id for h in s.search("barcelona", include_reasoning=True)] == [r]
        assert s.search("barcelona") == [] and [h.message_id for h in s.search("Lyon")] == [3]
        check_index(s)
    assert fts_columns(path) == ["content", "reasoning"]


def test_every_write_path_keeps_the_reasoning_apart_from_the_answer():
    with Store.open() as s:
        cid, _q, r = s.begin_turn(None, "Is 91 prime?")
        assert s.get_conversation(cid).messages[-1].reasoning == ""
        s.update_reply(r, "", "91 = 7 x")  # thinking, no answer yet
        s.update_reply(r, "No", "91 = 7 x 13.")
        got = s.get_conversation(cid).messages[-1]
        assert (got.content, got.reasoning, got.state) == ("No", "91 = 7 x 13.", GENERATING)
        s.update_reply(r, "No,")  # a caller that does not know of reasoning leaves it
        assert s.get_conversation(cid).messages[-1].reasoning == "91 = 7 x 13."
        figures = stats(reasoning_tokens=431, reasoning_s=12.4, ttfa_s=12.5)
        s.finish_reply(r, "No, 91 = 7 x 13.", figures)  # None: what streamed stays
        got = s.get_conversation(cid).messages[-1]
        assert (got.content, got.reasoning, got.state) == ("No, 91 = 7 x 13.", "91 = 7 x 13.", COMPLETE)
        assert got.stats == figures
        assert (got.stats.reasoning_tokens, got.stats.reasoning_s, got.stats.ttfa_s) == (431, 12.4, 12.5)

        r2 = s.begin_reply(cid, parent_id=got.parent_id)  # regenerated, sealed with its own
        s.update_reply(r2, "", "old thought")
        s.finish_reply(r2, "No.", None, reasoning="7 x 13 = 91")
        assert s.get_conversation(cid).messages[-1].reasoning == "7 x 13 = 91"

        mid = s.add_message(cid, "assistant", "added", reasoning="why it was added")
        conv = s.get_conversation(cid)
        assert conv.messages[-1].id == mid and conv.messages[-1].reasoning == "why it was added"
        assert [m.reasoning for m in conv.tree if m.role == "user"] == [""]

        # Import and fork carry it: both go through the one insert.
        copy = s.get_conversation(s.import_conversation(conv))
        assert [(m.content, m.reasoning) for m in copy.tree] == [(m.content, m.reasoning) for m in conv.tree]
        fork = s.get_conversation(s.fork(cid, r))
        assert [(m.content, m.reasoning) for m in fork.messages] == \
               [("Is 91 prime?", ""), ("No, 91 = 7 x 13.", "91 = 7 x 13.")]


def test_reasoning_with_no_answer_is_not_sent_as_history_but_is_kept():
    with Store.open() as s:
        cid, _q, r = s.begin_turn(None, "Think hard")
        s.finish_reply(r, "", None, state=INTERRUPTED, reasoning="Let me think about")
        conv = s.get_conversation(cid)
        assert conv.messages[-1].reasoning == "Let me think about"
        msgs, ids = conv.history()
        assert [m.content for m in msgs] == ["Think hard"] and len(ids) == 1


def _crash_after_saving(text: str, reasoning: str) -> int:
    """A real writer process that saves a growing reply and dies without sealing it."""
    code = ("import sys; from app.history.store import Store\n"
            "s = Store.open()\n"
            "cid, q, r = s.begin_turn(None, 'Why is the sky blue?')\n"
            f"s.update_reply(r, {text!r}, {reasoning!r})\n"
            "print(r, flush=True)\n"
            "import os; os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_a_crash_while_thinking_keeps_the_reasoning_and_one_with_nothing_is_removed():
    thinking = _crash_after_saving("", "Rayleigh scattering: shorter wavelengths")
    nothing = _crash_after_saving("", "")  # its opening recovers the first; this one is left to us
    with Store.open() as s:
        assert s.recovered == 1
        kept = [m for c in s.list_conversations() for m in s.get_conversation(c.id).tree
                if m.role == "assistant"]
        assert [(m.id, m.content, m.reasoning, m.state) for m in kept] == \
               [(thinking, "", "Rayleigh scattering: shorter wavelengths", INTERRUPTED)]
        assert nothing not in {m.id for m in kept}
        assert [h.message_id for h in s.search("rayleigh", include_reasoning=True)] == [thinking]
        check_index(s)
