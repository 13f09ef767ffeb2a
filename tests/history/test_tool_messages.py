"""Tool calls and results in the store (schema v4), its migration from v3, transcripts and every export."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from app.engine.message import ToolCall
from app.engine.stats import ReplyStats
from app.history import export, migrations, transcript
from app.history.errors import TranscriptError
from app.history.records import COMPLETE, JSON_REPLY
from app.history.store import Store, default_path

CALL = ToolCall("call_1", "get_weather", '{"city": "Zürich", "unit": "celsius"}')
CLOCK = ToolCall("call_2", "current_time", "{}")
STATS = ReplyStats(ttft_s=0.1, prefill_tokens=9, cached_tokens=0, prefill_s=0.01, prefill_tok_s=900.0,
                   decode_tokens=12, decode_s=0.1, decode_tok_s=120.0, total_s=0.2, kv_used=21, n_ctx=512,
                   stop_reason="stop")
TOOLS = {"builtin": ["current_time"], "declared": [{"type": "function", "function": {
    "name": "get_weather", "description": "", "parameters": {"type": "object"}}}], "choice": "auto"}


def tool_conversation(s: Store) -> int:
    cid, _q, reply = s.begin_turn(None, "Weather in Zürich, and the time?", tools=TOOLS)
    s.finish_reply(reply, "", STATS, tool_calls=(CALL, CLOCK))
    s.add_message(cid, "tool", '{"temp": 21, "sky": "clear"}', tool_call_id="call_1", tool_name="get_weather")
    s.add_message(cid, "tool", "14:05 on a Wednesday", tool_call_id="call_2", tool_name="current_time")
    answer = s.begin_reply(cid)
    s.finish_reply(answer, "It is 21 °C and clear; the time is 14:05.", STATS)
    return cid


def test_a_v3_file_migrates_to_v4_keeping_rows_ids_and_search():
    path = default_path()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=3)
    migrations.ensure_search_index(conn, migrations.fts_available())
    conn.execute("INSERT INTO conversations (title, created_at, updated_at, settings, reply_format) "
                 "VALUES ('from v3', 100.0, 200.0, '{}', '{\"mode\": \"json\"}')")
    for i, (role, text, fmt) in enumerate([("user", "hello from version three", None),
                                           ("assistant", '{"a": 1}', "json"), ("user", "gone", None)]):
        conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state, "
                     "format, stats) VALUES (1, ?, ?, ?, ?, 'complete', ?, ?)",
                     (role, text, 150.0 + i, 150.0 + i, fmt, json.dumps(STATS.to_json()) if fmt else None))
    conn.execute("DELETE FROM messages WHERE id = 3")  # its id must not come back
    conn.execute("COMMIT")
    with pytest.raises(sqlite3.IntegrityError):  # v3 refuses the role: what the rebuild is for
        conn.execute("INSERT INTO messages (conversation_id, role, content, created_at) "
                     "VALUES (1, 'tool', 'x', 1.0)")
    conn.close()

    with Store.open() as s:
        conv = s.get_conversation(1)
        assert [(m.id, m.role, m.content, m.format, m.state) for m in conv.messages] == \
               [(1, "user", "hello from version three", None, COMPLETE),
                (2, "assistant", '{"a": 1}', JSON_REPLY, COMPLETE)]
        assert conv.messages[1].stats == STATS and conv.reply_format == {"mode": "json"}
        assert conv.tools is None
        mid = s.add_message(1, "tool", "a result from version four", tool_call_id="c", tool_name="clock")
        assert mid == 4
        if s.fts:  # the search triggers went with the old table and were made again
            assert [h.message_id for h in s.search("version three")] == [1]
            assert [h.message_id for h in s.search("version four")] == [4]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT >= 4
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"messages_by_conversation", "messages_generating"} <= indexes
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_calls_and_results_round_trip_through_the_store_and_its_history():
    with Store.open() as s:
        cid = tool_conversation(s)
        conv = s.get_conversation(cid)
        s.set_tools(cid, None)
        assert s.get_conversation(cid).tools is None
    assert conv.tools == TOOLS
    _user, calls, weather, _clock, answer = conv.messages
    assert answer.tool_calls == () and answer.content.startswith("It is 21")
    assert (calls.content, calls.tool_calls) == ("", (CALL, CLOCK))
    assert (weather.role, weather.tool_call_id, weather.tool_name) == ("tool", "call_1", "get_weather")
    msgs, ids = conv.history()
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "assistant"]
    assert msgs[1].tool_calls == (CALL, CLOCK)
    assert (msgs[3].tool_call_id, msgs[3].tool_name) == ("call_2", "current_time")
    assert ids == [m.id for m in conv.messages]


def test_a_tool_message_must_name_its_tool():
    with Store.open() as s:
        cid = s.create_conversation()
        with pytest.raises(ValueError, match="needs a tool_name"):
            s.add_message(cid, "tool", "42")


def test_calls_a_hand_edit_broke_read_as_none():
    with Store.open() as s:
        cid = tool_conversation(s)
    conn = sqlite3.connect(default_path())
    with conn:
        conn.execute("UPDATE messages SET tool_calls = '[{\"id\": 1}' WHERE conversation_id = ?", (cid,))
    conn.close()
    with Store.open() as s:
        assert all(m.tool_calls == () for m in s.get_conversation(cid).messages)


@pytest.mark.parametrize("fmt", ["md", "html", "txt"])
def test_every_export_shows_calls_as_name_and_arguments_and_results_as_results(fmt):
    with Store.open() as s:
        conv = s.get_conversation(tool_conversation(s))
    out = export.render(conv, fmt)
    assert '{"city": "Zürich", "unit": "celsius"}' not in out  # never the raw call text
    assert '"tool_calls"' not in out
    assert "get_weather" in out and "current_time" in out
    plain = re.sub(r"<[^>]+>", "", out)  # HTML's highlighting splits the JSON into spans
    assert re.search(r'"city"\s*:\s*"Zürich",?\s*\n\s*"unit"', plain.replace("&quot;", '"')), out
    if fmt == "md":
        assert "**Tool call · `get_weather`**" in out and "**Result of `get_weather`**" in out
        assert "```json\n{\n  \"temp\": 21," in out  # a JSON result highlighted, pretty-printed
        assert "```text\n14:05 on a Wednesday\n```" in out
    elif fmt == "html":
        assert out.count('class="msg tool"') == 2 and "Result of <code>current_time</code>" in out
    else:
        assert "Tool call: get_weather\n  {\n    \"city\": \"Zürich\"," in out
        assert "Result of current_time:\n  14:05 on a Wednesday" in out
    assert "tools: current_time, get_weather" in out  # the header names the conversation's tools


def test_the_json_transcript_round_trips_calls_results_and_tools(tmp_path):
    with Store.open() as s:
        conv = s.get_conversation(tool_conversation(s))
        path = export.export(conv, tmp_path / "t.json")
        doc = json.loads(path.read_text())
        assert doc["conversation"]["messages"][1]["tool_calls"][0] == \
               {"id": "call_1", "name": "get_weather", "arguments": CALL.arguments}
        assert "tool_calls" not in doc["conversation"]["messages"][0]  # only where there are calls
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
    strip = [(m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, m.stats) for m in conv.messages]
    assert [(m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, m.stats)
            for m in back.messages] == strip
    assert back.tools == TOOLS


@pytest.mark.parametrize("edit, message", [
    (lambda ms: ms[1].update(tool_calls=[{"id": "x", "name": "f"}]), "messages[1].tool_calls[0] should be"),
    (lambda ms: ms[0].update(tool_calls=[{"id": "x", "name": "f", "arguments": "{}"}]),
     "messages[0]: it has tool_calls, which only an assistant"),
    (lambda ms: ms[2].pop("tool_name"), "messages[2]: a tool message needs a tool_name"),
])
def test_a_transcript_with_malformed_tool_parts_is_refused_naming_them(tmp_path, edit, message):
    with Store.open() as s:
        conv = s.get_conversation(tool_conversation(s))
    doc = transcript.to_document(conv)
    edit(doc["conversation"]["messages"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(TranscriptError, match=re.escape(message)):
        transcript.load(bad)
