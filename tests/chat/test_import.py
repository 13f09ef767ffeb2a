"""JSON transcripts come back identically; bad ones change nothing."""

from __future__ import annotations

import copy
import json
import sqlite3

import pytest

from app.chat import export, transcript
from app.chat.errors import TranscriptError
from app.chat.records import INTERRUPTED
from app.chat.store import Store
from app.engine.stats import ReplyStats

STATS = ReplyStats(ttft_s=0.5, prefill_tokens=10, cached_tokens=0, prefill_s=0.01, prefill_tok_s=1000.0,
                   decode_tokens=5, decode_s=0.05, decode_tok_s=100.0, total_s=0.6, kv_used=15, n_ctx=512,
                   stop_reason="cancelled", prompt_tokens=10, wall_decode_tok_s=None, dropped_messages=1,
                   dropped_tokens=7, error=None)


def without_ids(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc.pop("exported_at")
    doc["conversation"].pop("id")
    return doc


@pytest.fixture
def saved(tmp_path):
    with Store.open() as s:
        cid = s.create_conversation(system_prompt="sys 🦙", model="m.gguf",
                                    settings={"seed": 7, "stop": ["X"]})
        s.add_message(cid, "user", "first <b>", out_of_context=True)
        s.add_message(cid, "assistant", "reply\n\twith tabs", stats=STATS, out_of_context=True)
        s.add_message(cid, "user", "second")
        r = s.begin_reply(cid)
        s.finish_reply(r, "partial", None, state=INTERRUPTED)
        s.rename_conversation(cid, "Renamed")
        conv = s.get_conversation(cid)
    path = tmp_path / "t.json"
    export.export(conv, path)
    return conv, path


def test_round_trip_is_identical(saved):
    conv, path = saved
    with Store.open() as s:
        new_id = s.import_conversation(transcript.load(path))
        back = s.get_conversation(new_id)
    assert new_id != conv.id
    assert without_ids(transcript.to_document(back)) == without_ids(transcript.to_document(conv))
    assert back.messages[1].stats == STATS
    assert [(m.created_at, m.updated_at) for m in back.messages] == \
           [(m.created_at, m.updated_at) for m in conv.messages]
    assert (back.title, back.created_at, back.updated_at) == (conv.title, conv.created_at, conv.updated_at)


def test_imported_text_is_searchable(saved):
    _, path = saved
    with Store.open() as s:
        new_id = s.import_conversation(transcript.load(path))
        assert new_id in {h.conversation_id for h in s.search("with tabs")}


def test_generating_message_arrives_interrupted(saved, tmp_path):
    _, path = saved
    doc = json.loads(path.read_text("utf-8"))
    doc["conversation"]["messages"][-1]["state"] = "generating"
    p = tmp_path / "gen.json"
    p.write_text(json.dumps(doc))
    with Store.open() as s:
        cid = s.import_conversation(transcript.load(p))
        assert s.get_conversation(cid).messages[-1].state == INTERRUPTED
        assert s.recovered == 0


def _break(doc, how):
    c = doc["conversation"]
    m = c["messages"]
    match how:
        case "version":
            doc["version"] = transcript.VERSION + 1
        case "format":
            doc["format"] = "something.else"
        case "no conversation":
            del doc["conversation"]
        case "title type":
            c["title"] = 5
        case "messages type":
            c["messages"] = {"0": m[0]}
        case "role":
            m[0]["role"] = "wizard"
        case "state":
            m[0]["state"] = "done"
        case "content missing":
            del m[2]["content"]
        case "created bool":
            m[0]["created_at"] = True
        case "stats type":
            m[1]["stats"] = "fast"
        case "stats field missing":
            del m[1]["stats"]["decode_tokens"]
        case "stats field type":
            m[1]["stats"]["kv_used"] = "15"
        case "last message broken":  # everything before it valid: still nothing written
            m[-1]["out_of_context"] = "yes"
    return doc


BREAKS = ["version", "format", "no conversation", "title type", "messages type", "role", "state",
          "content missing", "created bool", "stats type", "stats field missing", "stats field type",
          "last message broken"]


def db_rows(path) -> tuple[int, int]:
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("SELECT count(*) FROM conversations").fetchone()[0],
                conn.execute("SELECT count(*) FROM messages").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("how", BREAKS)
def test_malformed_transcript_is_refused_and_writes_nothing(saved, tmp_path, how):
    _, path = saved
    bad = tmp_path / f"bad-{how.replace(' ', '-')}.json"
    bad.write_text(json.dumps(_break(json.loads(path.read_text("utf-8")), how)))
    with Store.open() as s:
        before = db_rows(s.path)
        with pytest.raises(TranscriptError) as exc:
            s.import_conversation(transcript.load(bad))
        assert db_rows(s.path) == before
    msg = str(exc.value)
    assert str(bad) in msg and "\n" not in msg


def test_version_error_says_which_versions(saved, tmp_path):
    _, path = saved
    bad = tmp_path / "v2.json"
    bad.write_text(json.dumps(_break(json.loads(path.read_text("utf-8")), "version")))
    with pytest.raises(TranscriptError, match=f"version {transcript.VERSION + 1} is a newer version"):
        transcript.load(bad)


@pytest.mark.parametrize("raw, why", [
    (b"{not json", "not valid JSON (line 1 column 2"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    (b"[1, 2, 3]", "not a LlamaDesk transcript"),
    (b"", "not valid JSON"),
])
def test_unreadable_files_get_a_clear_reason(tmp_path, raw, why):
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw)
    with pytest.raises(TranscriptError) as exc:
        transcript.load(bad)
    assert why in str(exc.value) and str(bad) in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(TranscriptError, match="cannot read it"):
        transcript.load(tmp_path / "nope.json")


def test_unknown_keys_are_ignored_and_new_stats_fields_default(saved, tmp_path):
    _, path = saved
    doc = json.loads(path.read_text("utf-8"))
    doc["conversation"]["pinned"] = True
    del doc["conversation"]["messages"][1]["stats"]["error"]  # a field with a default
    p = tmp_path / "extra.json"
    p.write_text(json.dumps(doc))
    conv = transcript.load(p)
    assert conv.messages[1].stats.error is None and conv.messages[1].stats.dropped_tokens == 7
