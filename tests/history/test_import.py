"""JSON transcripts come back identically; bad ones change nothing."""

from __future__ import annotations

import json

import pytest

from app.engine.stats import ReplyStats
from app.history import export, transcript
from app.history.errors import TranscriptError
from app.history.records import INTERRUPTED
from app.history.store import Store
from tests.store_rows import row_counts
from tests.transcripts import by_position

STATS = ReplyStats(ttft_s=0.5, prefill_tokens=10, cached_tokens=0, prefill_s=0.01, prefill_tok_s=1000.0,
                   decode_tokens=5, decode_s=0.05, decode_tok_s=100.0, total_s=0.6, kv_used=15, n_ctx=512,
                   stop_reason="cancelled", prompt_tokens=10, wall_decode_tok_s=None, dropped_messages=1,
                   dropped_tokens=7, error=None)


def without_ids(doc: dict) -> dict:
    """The document as the conversation it describes: every id (renumbered by an import) by position."""
    return by_position(doc)


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


def refused(bad) -> str:
    """Import `bad`, which must fail with one TranscriptError and write nothing; its message."""
    with Store.open() as s:
        before = row_counts(s.path)
        with pytest.raises(TranscriptError) as exc:
            s.import_conversation(transcript.load(bad))
        assert row_counts(s.path) == before
    return str(exc.value)


@pytest.mark.parametrize("how", BREAKS)
def test_malformed_transcript_is_refused_and_writes_nothing(saved, tmp_path, how):
    _, path = saved
    bad = tmp_path / f"bad-{how.replace(' ', '-')}.json"
    bad.write_text(json.dumps(_break(json.loads(path.read_text("utf-8")), how)))
    msg = refused(bad)
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


def _with(path, tmp_path, name: str, change):
    doc = json.loads(path.read_text("utf-8"))
    change(doc["conversation"])
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(doc), "utf-8")  # json.dumps writes NaN/Infinity, as some tools do
    return p


def _set(field: str, value, message: int | None = None):
    def change(c):
        (c if message is None else c["messages"][message])[field] = value
    return change


@pytest.mark.parametrize("field, message", [("updated_at", None), ("created_at", None),
                                            ("created_at", 0), ("updated_at", 2)])
@pytest.mark.parametrize("value, why", [
    (1e300, "is not a time"), (-5, "is not a time"), (-1e18, "is not a time"),
    (10**400, "is not a time"), (float("inf"), "is Infinity"), (float("-inf"), "is -Infinity"),
    (float("nan"), "is NaN"), (1e18, "is not a time"),
])
def test_timestamps_out_of_range_are_refused_naming_the_field(saved, tmp_path, field, message, value, why):
    _, path = saved
    bad = _with(path, tmp_path, "bad", _set(field, value, message))
    msg = refused(bad)
    where = f"messages[{message}].{field}" if message is not None else f"conversation.{field}"
    assert str(bad) in msg and where in msg and why in msg and "\n" not in msg


def test_milliseconds_are_read_as_the_time_they_mean(saved, tmp_path):
    _, path = saved
    ms = 1733040000000  # 2024-12-01 in JavaScript's Date.now()
    p = _with(path, tmp_path, "ms", lambda c: c.update(created_at=ms, updated_at=ms + 500))
    conv = transcript.load(p)
    assert (conv.created_at, conv.updated_at) == (1733040000.0, 1733040000.5)
    edge = _with(path, tmp_path, "edge", lambda c: c.update(created_at=0, updated_at=253402128000))
    assert (transcript.load(edge).created_at, transcript.load(edge).updated_at) == (0.0, 253402128000.0)


@pytest.mark.parametrize("name, change, where", [
    ("content", _set("content", "half \ud83d a pair", 0), "messages[0].content"),
    ("title", _set("title", "\udcff"), "conversation.title"),
    ("settings key", _set("settings", {"ok": {"\ud800": 1}}), "a key in conversation.settings.ok"),
    ("settings value", _set("settings", {"stop": ["a", "\udfff"]}), "conversation.settings.stop[1]"),
    ("model", _set("model", "m\ud800.gguf"), "conversation.model"),
])
def test_lone_surrogates_are_refused_naming_the_field(saved, tmp_path, name, change, where):
    _, path = saved
    bad = _with(path, tmp_path, name.replace(" ", "-"), change)
    assert "\\ud" in bad.read_text("utf-8")  # an escaped half of a pair: valid JSON, not storable
    msg = refused(bad)
    assert str(bad) in msg and where in msg and "not valid UTF-8 text" in msg and "\n" not in msg
    msg.encode("utf-8")  # the message itself is printable


@pytest.mark.parametrize("raw, why", [
    (b'{"format": "llamadesk.transcript", "title": "caf\xe9"}', "byte 0xe9 at offset 48 is not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"version": ' + b"9" * 5000 + b"}", "a number thousands of digits long"),
    (b'{"format": "llamadesk.transcript", "version": ' + b"9" * 30 + b"}", "(a huge number)"),
])
def test_hostile_files_get_one_line_naming_the_file(tmp_path, raw, why):
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw)
    with pytest.raises(TranscriptError) as exc:
        transcript.load(bad)
    msg = str(exc.value)
    assert why in msg and str(bad) in msg and "\n" not in msg


def test_a_byte_order_mark_is_harmless(saved, tmp_path):
    conv, path = saved
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert transcript.load(p).title == conv.title
