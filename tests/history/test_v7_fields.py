"""Schema v7's message fields round-trip the real store: a tool row's MCP server, a user row's
attachments, a reply's documents and sources; and a v6 file migrates keeping its messages."""

from __future__ import annotations

import sqlite3

from app.engine.message import Attachment, DocsUse, Source
from app.history import migrations
from app.history.store import Store


def test_the_v7_fields_round_trip(tmp_path):
    att = Attachment("notes.pdf", "ab" * 32, "pdf", pages=3, tokens=812, chars=3900, path="/tmp/notes.pdf")
    docs = DocsUse("retrieved", 412, (Source(1, "notes.pdf", "ab" * 32, "page 2", 100, 180, "The answer"),))
    with Store.open(tmp_path / "h.db") as s:
        cid = s.create_conversation("t")
        s.add_message(cid, "user", "what does it say?", attachments=[att])
        s.add_message(cid, "assistant", "It says [1].", docs=docs)
        s.add_message(cid, "tool", "12:00", tool_call_id="c1", tool_name="get_current_time",
                      tool_server="time")
        got = s.get_conversation(cid).messages
    assert got[0].attachments == (att,) and got[0].docs is None
    assert got[1].docs == docs and got[1].attachments == ()
    assert got[2].tool_server == "time" and got[1].tool_server is None


def test_a_v6_file_migrates_to_v7(tmp_path):
    path = tmp_path / "h.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=6)
    conn.execute("INSERT INTO conversations (title, created_at, updated_at, settings) "
                 "VALUES ('x', 1, 1, '{}')")
    conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state) "
                 "VALUES (1, 'user', 'hello', 1, 1, 'complete')")
    conn.execute("COMMIT")
    conn.close()
    with Store.open(path) as s:
        m = s.get_conversation(1).messages[0]
    assert m.content == "hello" and m.attachments == () and m.docs is None and m.tool_server is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT >= 7
    assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 0
    conn.close()
