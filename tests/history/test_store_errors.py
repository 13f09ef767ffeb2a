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
