"""The store on real SQLite files under the test's own XDG dirs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from app import paths
from app.engine.stats import ReplyStats
from app.errors import LlamaDeskError
from app.history import migrations
from app.history.errors import ConversationNotFound, StoreError, StoreUnavailableError, StoreVersionError
from app.history.records import COMPLETE, GENERATING, INTERRUPTED
from app.history.store import DB_NAME, Store, default_path, make_title


def stats(**kw) -> ReplyStats:
    base = dict(ttft_s=0.12, prefill_tokens=40, cached_tokens=8, prefill_s=0.04, prefill_tok_s=1000.0,
                decode_tokens=20, decode_s=0.2, decode_tok_s=100.0, total_s=0.35, kv_used=68, n_ctx=2048,
                stop_reason="stop", prompt_tokens=48, wall_decode_tok_s=98.5)
    return ReplyStats(**{**base, **kw})


@pytest.fixture
def store():
    s = Store.open()
    yield s
    s.close()


def columns(path, table) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    finally:
        conn.close()


# --- migrations --------------------------------------------------------------

def test_default_path_is_under_the_isolated_data_dir(isolated_dirs):
    assert default_path() == paths.data_dir() / DB_NAME
    assert str(default_path()).startswith(str(isolated_dirs))


def test_empty_database_migrates_to_current(store):
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    assert {"state", "out_of_context", "updated_at", "writer_pid"} <= columns(store.path, "messages")
    assert "deleted_at" in columns(store.path, "conversations")


def test_v1_database_migrates_keeping_its_rows():
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=1)
    conn.execute("INSERT INTO conversations (title, created_at, updated_at, system_prompt, model, settings) "
                 "VALUES ('old one', 100.0, 200.0, 'be brief', 'm.gguf', '{\"max_tokens\": 9}')")
    conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, stats) "
                 "VALUES (1, 'user', 'hello from v1', 150.0, NULL)")
    conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, stats) VALUES "
                 "(1, 'assistant', 'hi', 160.0, ?)", (__import__("json").dumps(stats().to_json()),))
    conn.execute("COMMIT")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
    assert "state" not in columns(path, "messages")

    with Store.open() as s:
        conv = s.get_conversation(1)
        assert (conv.title, conv.system_prompt, conv.model, conv.settings) == \
               ("old one", "be brief", "m.gguf", {"max_tokens": 9})
        assert [(m.role, m.content, m.state, m.updated_at) for m in conv.messages] == \
               [("user", "hello from v1", COMPLETE, 150.0), ("assistant", "hi", COMPLETE, 160.0)]
        assert conv.messages[1].stats == stats()
        assert [h.message_id for h in s.search("from v1")] == [1]  # the index covers old rows
    assert "state" in columns(path, "messages")


def test_newer_database_is_refused_untouched():
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE future (x)")
    conn.execute(f"PRAGMA user_version = {migrations.CURRENT + 1}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreVersionError) as exc:
        Store.open()
    msg = str(exc.value)
    assert str(path) in msg and "newer" in msg and "\n" not in msg
    assert isinstance(exc.value, StoreError) and isinstance(exc.value, LlamaDeskError)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [DB_NAME]


# --- damaged files -----------------------------------------------------------

def test_garbage_file_is_moved_aside_and_a_fresh_one_started():
    path = default_path()
    junk = b"this is not sqlite " * 500
    path.write_bytes(junk)
    with Store.open() as s:
        assert s.moved_to is not None and s.moved_to.read_bytes() == junk
        assert str(s.moved_to) in s.notice and str(path) in s.notice and "\n" not in s.notice
        cid = s.create_conversation()
        s.add_message(cid, "user", "fresh start")
    with Store.open() as s:
        assert s.notice is None
        assert [c.title for c in s.list_conversations()] == ["fresh start"]


def test_damaged_pages_are_caught_and_moved_aside():
    path = default_path()
    with Store.open() as s:
        cid = s.create_conversation()
        for i in range(300):
            s.add_message(cid, "user", f"message {i} " + "x" * 200)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for off in range(page * 3, len(data) - page, page * 2):  # scribble over interior pages
        data[off + 8: off + 400] = b"\xa5" * 392
    path.write_bytes(bytes(data))
    with Store.open() as s:
        assert s.moved_to is not None and s.moved_to.read_bytes() == bytes(data)
        assert s.list_conversations() == []


def test_a_folder_in_place_of_the_file_is_reported_and_never_moved(tmp_path):
    """Only damage SQLite found is moved aside; what merely cannot be opened stays put."""
    folder = tmp_path / "ro"
    folder.mkdir()
    bad = folder / "db"
    bad.mkdir()
    (bad / "keep").write_text("precious")
    with pytest.raises(StoreUnavailableError) as exc:
        Store.open(bad)
    assert str(exc.value) == f"{bad}: cannot open the history database: it is a folder, not a database file"
    assert (bad / "keep").read_text() == "precious" and sorted(p.name for p in folder.iterdir()) == ["db"]


# --- conversations -----------------------------------------------------------

def test_title_comes_from_the_first_user_message_and_can_be_renamed(store):
    cid = store.create_conversation(system_prompt="sys")
    store.add_message(cid, "user", "  What is\tthe capital\nof France?  ")
    store.add_message(cid, "user", "second message")
    assert store.get_conversation(cid).title == "What is the capital"
    store.rename_conversation(cid, "  Geography   quiz ")
    assert store.list_conversations()[0].title == "Geography quiz"
    with pytest.raises(ValueError):
        store.rename_conversation(cid, "   ")
    assert make_title("y" * 100).endswith("…") and len(make_title("y" * 100)) == 60


def test_list_is_newest_first_with_counts(store):
    a = store.create_conversation()
    b = store.create_conversation()
    store.add_message(b, "user", "b1")
    time.sleep(0.01)
    store.add_message(a, "user", "a1")
    store.add_message(a, "assistant", "a2", stats=stats())
    rows = store.list_conversations()
    assert [(r.id, r.message_count) for r in rows] == [(a, 2), (b, 1)]
    assert [r.id for r in store.list_conversations(limit=1)] == [a]


def test_delete_hides_restore_undoes_purge_removes(store):
    cid = store.create_conversation()
    store.add_message(cid, "user", "findable needle")
    store.delete_conversation(cid)
    assert store.list_conversations() == [] and store.search("needle") == []
    with pytest.raises(ConversationNotFound):
        store.get_conversation(cid)
    store.restore_conversation(cid)
    assert [c.id for c in store.list_conversations()] == [cid]
    assert [h.conversation_id for h in store.search("needle")] == [cid]
    store.delete_conversation(cid)
    assert store.purge_deleted(older_than_s=3600) == 0  # too recent for the automatic purge
    assert store.purge_deleted() == 1
    with pytest.raises(ConversationNotFound):
        store.restore_conversation(cid)
    conn = sqlite3.connect(store.path)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    conn.close()


def test_missing_conversation_error_names_file_and_id(store):
    with pytest.raises(ConversationNotFound) as exc:
        store.add_message(42, "user", "x")
    assert str(store.path) in str(exc.value) and "42" in str(exc.value)


def test_conversation_round_trips_messages_stats_and_markers(store):
    cid = store.create_conversation(system_prompt="Be terse.", model="m.gguf", settings={"temperature": 0})
    u1 = store.add_message(cid, "user", "one")
    a1 = store.add_message(cid, "assistant", "uno", stats=stats(stop_reason="length"))
    u2 = store.add_message(cid, "user", "two")
    r = store.begin_reply(cid)
    store.finish_reply(r, "dos", stats(), out_of_context=[u1, a1])
    conv = store.get_conversation(cid)
    assert [(m.id, m.out_of_context) for m in conv.messages] == \
           [(u1, True), (a1, True), (u2, False), (r, False)]
    assert conv.messages[1].stats.stop_reason == "length"
    assert conv.messages[3].stats == stats() and conv.messages[3].state == COMPLETE
    msgs, ids = conv.history()
    assert [m.content for m in msgs] == ["one", "uno", "two", "dos"] and ids == [u1, a1, u2, r]
    r2 = store.add_message(cid, "assistant", "", state=INTERRUPTED)  # cut off before its first token
    assert r2 not in store.get_conversation(cid).history()[1]
    store.set_out_of_context(cid, [u1])  # a later, roomier reply: markers are replaced
    assert [m.out_of_context for m in store.get_conversation(cid).messages] == [True] + [False] * 4


# --- search ------------------------------------------------------------------

def test_search_substring_case_insensitive_and_short_queries(store):
    assert store.fts, "this SQLite has FTS5 with trigrams; the index should be in use"
    a = store.create_conversation()
    store.add_message(a, "user", "The Dragon of Ljubljana")
    store.add_message(a, "assistant", "100% sure: snake_case and ÉCLAIR")
    b = store.create_conversation()
    store.add_message(b, "user", "nothing here")
    assert [h.conversation_id for h in store.search("dragon")] == [a]
    assert [h.conversation_id for h in store.search("ubl")] == [a]  # inside a word
    assert [h.role for h in store.search("0%")] == ["assistant"]  # LIKE path, % escaped
    assert store.search("f_") == [] and len(store.search("e_c")) == 1  # "_" is literal, not a wildcard
    assert len(store.search("éclair")) == 1
    assert store.search('"quoted" thing') == [] and store.search("  ") == []
    hit = store.search("snake")[0]
    assert "snake_case" in hit.snippet and hit.title == "The Dragon of Ljubljana"


def test_search_without_fts_falls_back_to_like(store):
    cid = store.create_conversation()
    store.add_message(cid, "user", "plain LIKE scan")
    store.fts = False
    assert [h.conversation_id for h in store.search("like sc")] == [cid]


def test_fts_dropped_when_sqlite_lacks_it_and_rebuilt_later(monkeypatch):
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "before the switch")
    with monkeypatch.context() as m:  # (not monkeypatch.undo(): that would undo the XDG dirs too)
        m.setattr(migrations, "fts_available", lambda: False)
        with Store.open() as s:
            assert not s.fts
            s.add_message(cid, "user", "written without an index")
            assert len(s.search("without an")) == 1
    with Store.open() as s:
        assert s.fts
        assert len(s.search("without an")) == 1 and len(s.search("before the")) == 1


# --- crash safety ------------------------------------------------------------

def test_reply_saved_while_generating_then_finished(store):
    cid = store.create_conversation()
    r = store.begin_reply(cid)
    store.update_reply(r, "partial te")
    conn = sqlite3.connect(store.path)  # what another process (or a crash) would find
    assert conn.execute("SELECT content, state FROM messages WHERE id = ?", (r,)).fetchone() == \
           ("partial te", GENERATING)
    store.finish_reply(r, "partial text", stats())
    assert conn.execute("SELECT content, state FROM messages WHERE id = ?", (r,)).fetchone() == \
           ("partial text", COMPLETE)
    conn.close()


def test_reply_of_a_dead_process_becomes_interrupted_on_open():
    code = ("from app.history.store import Store\n"
            "s = Store.open(); c = s.create_conversation(); s.add_message(c, 'user', 'q')\n"
            "r = s.begin_reply(c); s.update_reply(r, 'half an ans')\n"
            "import os; os._exit(0)\n")  # gone without finishing
    subprocess.run([sys.executable, "-c", code], check=True)
    with Store.open() as s:
        assert s.recovered == 1
        m = s.get_conversation(1).messages[-1]
        assert (m.content, m.state) == ("half an ans", INTERRUPTED)


def test_live_writers_reply_is_left_alone(store):
    cid = store.create_conversation()
    r = store.begin_reply(cid)
    store.update_reply(r, "still going")
    with Store.open() as other:  # e.g. `llamadesk ask` starting while the window generates
        assert other.recovered == 0
        assert other.get_conversation(cid).messages[-1].state == GENERATING


def test_a_dead_writers_reply_with_no_text_is_removed_and_its_question_kept():
    code = ("from app.history.store import Store\n"
            "s = Store.open(); c = s.create_conversation(); s.add_message(c, 'user', 'q')\n"
            "s.begin_reply(c)\n"
            "import os; os._exit(0)\n")  # killed during the prefill: no text was ever shown
    subprocess.run([sys.executable, "-c", code], check=True)
    with Store.open() as s:
        assert s.recovered == 1
        assert [(m.role, m.content) for m in s.get_conversation(1).messages] == [("user", "q")]


def test_silent_writer_is_considered_dead(store):
    cid = store.create_conversation()
    r = store.begin_reply(cid)
    store.update_reply(r, "some text")
    conn = sqlite3.connect(store.path)
    conn.execute("UPDATE messages SET updated_at = ? WHERE id = ?", (time.time() - 3600, r))
    conn.commit()
    conn.close()
    assert store.recover_interrupted() == 1
    assert store.get_conversation(cid).messages[-1].state == INTERRUPTED


def test_closed_store_raises_store_error():
    s = Store.open()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.list_conversations()
