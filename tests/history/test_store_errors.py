"""SQLite's errors split by blame, on a real database: the machine's are one line to act on,
ours are bugs, reported as such with the traceback in the log."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from app.history import opening
from app.history.errors import StoreBug, StoreError
from app.history.store import Store, default_path


def test_a_database_another_program_keeps_locked_is_the_environments_problem(monkeypatch, caplog):
    monkeypatch.setattr(opening, "BUSY_TIMEOUT_MS", 200)
    store = Store.open()
    other = sqlite3.connect(default_path(), isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        with caplog.at_level(logging.ERROR, "llamadesk.history"), pytest.raises(StoreError) as got:
            store.begin_turn(None, "Hello?")
        assert not isinstance(got.value, StoreBug)
        assert "locked" in str(got.value) and "\n" not in str(got.value)
        assert not caplog.records, "the machine's problem is not logged as a bug"
    finally:
        other.execute("ROLLBACK")
        other.close()
        store.close()


def test_a_statement_sqlite_refuses_for_a_reason_of_ours_is_a_bug_with_its_traceback(caplog):
    store = Store.open()
    other = sqlite3.connect(default_path(), isolation_level=None)
    # A rule the store's code does not expect: every insert of a message now fails its constraint.
    other.execute("CREATE TRIGGER refuse BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'no'); END")
    other.close()
    try:
        with caplog.at_level(logging.ERROR, "llamadesk.history"), pytest.raises(StoreBug) as got:
            store.begin_turn(None, "Hello?")
        line = str(got.value)
        assert "bug" in line and "SQLITE_CONSTRAINT" in line and "\n" not in line
        (rec,) = [r for r in caplog.records if r.name == "llamadesk.history"]
        assert rec.exc_info is not None, "the traceback goes to the log file"
        assert store.list_conversations() == [], "the failed turn left nothing behind"
    finally:
        store.close()


@pytest.mark.parametrize("misuse, says", [
    (lambda conn: conn.execute("SELEC id FROM conversations"), "SQLITE_ERROR"),  # a typo in our SQL
    (lambda conn: conn.execute("SELECT ?", ()), "ProgrammingError"),  # Python's refusal: no result code
])
def test_bad_sql_and_a_misused_connection_are_bugs_and_the_store_goes_on(caplog, misuse, says):
    store = Store.open()
    try:
        with caplog.at_level(logging.ERROR, "llamadesk.history"), pytest.raises(StoreBug) as got:
            with store._read() as conn:
                misuse(conn)
        line = str(got.value)
        assert "LlamaDesk bug" in line and says in line and "\n" not in line
        assert "database error" not in line, "not worded as the disk's problem"
        (rec,) = [r for r in caplog.records if r.name == "llamadesk.history"]
        assert rec.exc_info is not None
        store.begin_turn(None, "Hello?")  # the connection is fine: the next call works
        assert len(store.list_conversations()) == 1
    finally:
        store.close()


def test_the_split_is_sqlites_result_code_on_real_errors(tmp_path):
    """The machine's errors (a read-only or foreign file) against ours (a constraint, bad SQL)."""
    from app import sqlite_errors

    def raised(fn) -> sqlite3.Error:
        with pytest.raises(sqlite3.Error) as got:
            fn()
        return got.value

    db = tmp_path / "t.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (1)")
    ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rw = sqlite3.connect(db)
    (tmp_path / "not.db").write_bytes(b"this is not a database" * 200)
    foreign = sqlite3.connect(tmp_path / "not.db")
    try:
        machine = [raised(lambda: ro.execute("INSERT INTO t VALUES (2)")),
                   raised(lambda: foreign.execute("SELECT * FROM sqlite_master"))]
        ours = [raised(lambda: rw.execute("INSERT INTO t VALUES (1)")),
                raised(lambda: rw.execute("SELECT nope FROM t"))]
        assert [sqlite_errors.is_bug(e) for e in machine] == [False, False], machine
        assert [sqlite_errors.is_bug(e) for e in ours] == [True, True], ours
        assert [sqlite_errors.name(e) for e in ours] == ["SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_ERROR"]
    finally:
        for c in (ro, rw, foreign):
            c.close()
