"""A conversation's reply format: checked when given, kept with the conversation, enforced on the
real model (the window's chooser uses these same checks; tests/ui/test_reply_format_window.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import pytest

from app.chat.conversation import LiveConversation
from app.chat.recorder import TurnRecorder, record_turn
from app.chat.reply_format import (
    ANY_JSON,
    SCHEMA,
    TEXT,
    ReplyFormat,
    ReplyFormatError,
    read_schema_file,
    reply_kind,
    schema_format,
)
from app.engine.events import Progress
from app.engine.grammar import Constraint
from app.engine.sampling import GenerationSettings
from app.history.records import JSON_REPLY
from app.history.store import Store

CITY = {"title": "City", "type": "object", "additionalProperties": False, "required": ["name", "country"],
        "properties": {"name": {"type": "string", "maxLength": 20},
                       "country": {"type": "string", "maxLength": 20}}}


@pytest.fixture
def store():
    s = Store.open()
    yield s
    s.close()


@pytest.mark.parametrize("text, said", [
    ("", "the schema is empty"),
    ('{"type": "object",\n "properties": }', "not JSON: Expecting value at line 2, column 16"),
    ("[1, 2]", "not a list"),
    ('"object"', "not a string"),
    ('{"type": "array", "uniqueItems": true}', "uniqueItems"),
])
def test_a_schema_that_cannot_be_used_is_refused_in_one_line(text, said):
    with pytest.raises(ReplyFormatError) as e:
        schema_format(text)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_a_schema_keeps_its_text_and_is_named_by_its_file_or_title():
    text = json.dumps(CITY, indent=2)
    fmt = schema_format(text)
    assert (fmt.mode, fmt.schema, fmt.name, fmt.label()) == (SCHEMA, text, "City", "Schema: City")
    assert schema_format(text, "city.json").label() == "Schema: city.json"
    assert fmt.constraint() == Constraint.json_schema(CITY)
    assert ReplyFormat(ANY_JSON).constraint() == Constraint.any_json() and ReplyFormat().constraint() is None
    for f in (fmt, ReplyFormat(), ReplyFormat(ANY_JSON)):
        assert ReplyFormat.from_json(json.loads(json.dumps(f.to_json()))) == f
    assert ReplyFormat.from_json(None) == ReplyFormat(TEXT)


def test_only_json_constraints_mark_a_reply_as_json():
    assert reply_kind(Constraint.any_json()) == JSON_REPLY == reply_kind(Constraint("json_object", "{}"))
    assert reply_kind(Constraint("regex", r"\d+")) is None and reply_kind(None) is None


def test_schema_files_that_cannot_be_read_are_named(tmp_path):
    good = tmp_path / "city.json"
    good.write_bytes(b"\xef\xbb\xbf" + json.dumps(CITY).encode())  # a BOM is harmless
    assert json.loads(read_schema_file(good)) == CITY
    with pytest.raises(ReplyFormatError, match=r"missing\.json: cannot read it"):
        read_schema_file(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"title": "caf\xe9"}')
    with pytest.raises(ReplyFormatError, match=r"latin\.json: not UTF-8 text"):
        read_schema_file(latin)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    with pytest.raises(ReplyFormatError, match="too large"):
        read_schema_file(big)


def test_a_stored_format_that_cannot_be_used_opens_as_text_with_a_note(store):
    cid, _q, _r = store.begin_turn(None, "hi", reply_format={"mode": "schema", "schema": '{"uniqueItems": 1'})
    conv = LiveConversation.from_store(store.get_conversation(cid))
    assert conv.reply_format == ReplyFormat() and "cannot be used" in conv.format_note
    store.set_reply_format(cid, {"mode": "yaml"})
    note = LiveConversation.from_store(store.get_conversation(cid)).format_note
    assert "unknown reply format 'yaml'" in note
    store.set_reply_format(cid, {"mode": "json"})
    ok = LiveConversation.from_store(store.get_conversation(cid))
    assert ok.reply_format == ReplyFormat(ANY_JSON) and ok.format_note is None


def test_a_turn_held_to_a_schema_is_valid_json_and_saved_as_json(store, engine):
    fmt = schema_format(json.dumps(CITY))
    greedy = GenerationSettings(max_tokens=48, temperature=0.0, seed=1)
    settings = replace(greedy, constraint=fmt.constraint())
    seen: list[Progress] = []
    turn = record_turn(TurnRecorder(store), engine, None, "Name a city in France.", settings,
                       on_event=lambda ev: seen.append(ev) if isinstance(ev, Progress) else None)
    jsonschema.validate(json.loads(turn.reply.text), CITY)
    assert turn.reply.stats.grammar_ms_per_token is not None
    live = [p.grammar_ms for p in seen if p.phase == "decode"]
    if turn.reply.stats.decode_s > 0.5:  # long enough for the decode's Progress events
        assert live and all(ms is not None and ms > 0 for ms in live), "the grammar's cost goes out live"
    conv = store.get_conversation(turn.conversation_id)
    assert [m.format for m in conv.messages] == [None, JSON_REPLY]
    live = LiveConversation.from_store(conv)
    assert live.messages[1].format == JSON_REPLY
