"""Reply formats in the store (schema v3), in transcripts and in every export, on real SQLite files."""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.engine.stats import ReplyStats
from app.history import export, migrations, transcript
from app.history.errors import TranscriptError
from app.history.records import COMPLETE, JSON_REPLY
from app.history.store import Store, default_path

SCHEMA_FORMAT = {"mode": "schema", "schema": '{"type": "object", "title": "Städte"}', "name": "städte.json"}
REPLY = '{"city": "Paris", "note": "a ``` fence, </pre> and <b>"}'
STATS = ReplyStats(ttft_s=0.1, prefill_tokens=9, cached_tokens=0, prefill_s=0.01, prefill_tok_s=900.0,
                   decode_tokens=12, decode_s=0.1, decode_tok_s=120.0, total_s=0.2, kv_used=21, n_ctx=512,
                   stop_reason="stop", grammar_ms_per_token=0.04)


@pytest.fixture
def store():
    s = Store.open()
    yield s
    s.close()


def json_turn(s: Store, fmt: dict | None = SCHEMA_FORMAT, text: str = REPLY) -> int:
    cid, _q, reply = s.begin_turn(None, "Where is the Louvre?", reply_format=fmt, reply_as=JSON_REPLY)
    s.finish_reply(reply, text, STATS)
    return cid


def test_a_v2_database_migrates_to_v3_and_its_conversations_read_as_text():
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=2)
    conn.execute("INSERT INTO conversations (title, created_at, updated_at, settings) "
                 "VALUES ('from v2', 100.0, 200.0, '{}')")
    conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state) "
                 "VALUES (1, 'assistant', '{\"not\": \"json-marked\"}', 150.0, 150.0, 'complete')")
    conn.execute("COMMIT")
    conn.close()
    with Store.open() as s:
        conv = s.get_conversation(1)
        assert conv.reply_format is None  # text, as every conversation before formats
        assert [(m.content, m.format, m.state) for m in conv.messages] == \
               [('{"not": "json-marked"}', None, COMPLETE)]
        s.set_reply_format(1, {"mode": "json"})
        assert s.get_conversation(1).reply_format == {"mode": "json"}
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT >= 3
    finally:
        conn.close()


def test_the_format_and_json_replies_round_trip_through_the_store(store):
    cid = json_turn(store)
    conv = store.get_conversation(cid)
    assert conv.reply_format == SCHEMA_FORMAT
    user, reply = conv.messages
    assert (user.format, reply.format, reply.content) == (None, JSON_REPLY, REPLY)
    # A later turn without a format (the CLI's) leaves the conversation's as it was.
    store.begin_turn(cid, "And the Prado?")
    assert store.get_conversation(cid).reply_format == SCHEMA_FORMAT
    store.set_reply_format(cid, None)
    assert store.get_conversation(cid).reply_format is None


def test_a_format_the_store_cannot_read_opens_the_conversation_as_text(store):
    cid = json_turn(store)
    conn = sqlite3.connect(store.path)
    with conn:
        conn.execute("UPDATE conversations SET reply_format = '[1, 2' WHERE id = ?", (cid,))
        conn.execute("UPDATE messages SET format = 'yaml' WHERE conversation_id = ?", (cid,))
    conn.close()
    conv = store.get_conversation(cid)
    assert conv.reply_format is None and [m.format for m in conv.messages] == [None, None]


def test_a_bad_reply_kind_is_refused_before_anything_is_written(store):
    with pytest.raises(ValueError, match="yaml"):
        store.begin_turn(None, "hi", reply_as="yaml")
    assert store.list_conversations() == []


def test_transcripts_carry_the_format_and_import_it(store):
    conv = store.get_conversation(json_turn(store))
    doc = transcript.to_document(conv)
    assert doc["conversation"]["reply_format"] == SCHEMA_FORMAT
    assert [m["format"] for m in doc["conversation"]["messages"]] == [None, JSON_REPLY]
    back = transcript.from_document(json.loads(transcript.dumps(conv)))
    new_id = store.import_conversation(back)
    again = store.get_conversation(new_id)
    assert again.reply_format == SCHEMA_FORMAT
    assert [(m.content, m.format) for m in again.messages] == [(m.content, m.format) for m in conv.messages]


def test_a_transcript_without_formats_imports_as_text_and_a_bad_one_is_named(store, tmp_path):
    doc = transcript.to_document(store.get_conversation(json_turn(store)))
    del doc["conversation"]["reply_format"]
    for m in doc["conversation"]["messages"]:
        del m["format"]
    old = transcript.from_document(doc)  # what a LlamaDesk from before formats wrote
    assert old.reply_format is None and {m.format for m in old.messages} == {None}
    doc["conversation"]["messages"][1]["format"] = "yaml"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**doc, "exported_at": 1.0}))
    with pytest.raises(TranscriptError, match=r"messages\[1\]\.format 'yaml'"):
        transcript.load(path)


def test_every_export_shows_a_json_reply_as_a_json_code_block(store):
    conv = store.get_conversation(json_turn(store))
    pretty = json.dumps(json.loads(REPLY), ensure_ascii=False, indent=2)
    md = export.render(conv, "md")
    assert f"````json\n{pretty}\n````" in md  # a fence longer than the ``` inside the string
    page = export.render(conv, "html")
    assert "<figcaption>json</figcaption>" in page and "&lt;/pre&gt;" in page and "</pre> and" not in page
    assert "Paris" in export.render(conv, "txt")
    for fmt in ("md", "html", "txt"):  # the header says what the replies are held to
        assert "replies to a JSON schema (städte.json)" in export.render(conv, fmt)
    assert json.loads(export.render(conv, "json"))["conversation"]["messages"][1]["format"] == JSON_REPLY


def test_a_json_reply_cut_short_is_exported_as_the_model_wrote_it(store):
    cut = '{"city": "Par'
    conv = store.get_conversation(json_turn(store, text=cut))
    assert f"```json\n{cut}\n```" in export.render(conv, "md")
