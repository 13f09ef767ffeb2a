"""`llamadesk ask --continue` keeps the reply format the window saved with the conversation."""

from __future__ import annotations

import json

import jsonschema

from app.history.records import JSON_REPLY
from app.history.store import Store
from tests.commands.test_cli_history import llamadesk

CITY = {"type": "object", "additionalProperties": False, "required": ["city"],
        "properties": {"city": {"type": "string", "maxLength": 16}}}


def test_a_continued_conversation_keeps_its_schema_unless_told_otherwise(model_path, tmp_path):
    with Store.open() as s:
        cid, _q, reply = s.begin_turn(None, "Name a city.", reply_format={
            "mode": "schema", "schema": json.dumps(CITY), "name": "city.json"}, reply_as=JSON_REPLY)
        s.finish_reply(reply, '{"city": "Lyon"}', None)
    model = ["--model", str(model_path), "--ctx", "512", "--temperature", "0", "--max-tokens", "24"]
    r = llamadesk("ask", "Another one.", "--continue", str(cid), "--json", *model)
    assert r.returncode == 0, r.stderr
    jsonschema.validate(json.loads(json.loads(r.stdout)["text"]), CITY)
    digits = tmp_path / "digits.gbnf"
    digits.write_text("root ::= [0-9] [0-9]?")
    r = llamadesk("ask", "Any number.", "--continue", str(cid), "--grammar", str(digits), "--json", *model)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"].isdigit()  # the flag's constraint, not the stored schema
    with Store.open() as s:
        conv = s.get_conversation(cid)
    assert [m.format for m in conv.messages] == [None, JSON_REPLY, None, JSON_REPLY, None, None]
    assert conv.reply_format["name"] == "city.json"  # the CLI does not change the window's choice
