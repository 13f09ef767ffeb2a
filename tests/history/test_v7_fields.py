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


def test_a_documents_text_goes_with_the_last_message_that_attached_it(tmp_path):
    """What a user deleted is not kept: a branch deleted, a conversation purged or discarded
    takes its attachments' texts with it, unless another message still attaches them."""
    import hashlib

    from app.history.documents import StoredDocument

    def doc(text: str) -> tuple[StoredDocument, Attachment]:
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return (StoredDocument(sha, "n.md", "markdown", 0, text, ()),
                Attachment("n.md", sha, "markdown", chars=len(text)))

    (shared, shared_att), (own, own_att) = doc("kept while attached"), doc("only in branch two")
    with Store.open(tmp_path / "h.db") as s:
        one, two = s.create_conversation("one"), s.create_conversation("two")
        for d in (shared, own):
            s.put_document(d)
        s.add_message(one, "user", "q", attachments=[shared_att])
        q2 = s.add_message(two, "user", "q", attachments=[shared_att, own_att])
        s.add_message(two, "assistant", "a")
        s.delete_branch(two, q2)
        assert s.document(own.sha256) is None, "the branch that alone attached it is gone"
        assert s.document(shared.sha256) is not None, "conversation one still attaches it"
        s.delete_conversation(one)
        assert s.document(shared.sha256) is not None, "a deletion can be undone until purged"
        s.purge_deleted()
        assert s.document(shared.sha256) is None
