"""Tool turns on the real model: the call held to the tool format, read back as calls, the built-in
tool run, the result recorded and the model asked again until it answers in text."""

from __future__ import annotations

import json

import pytest

from app.chat import tool_loop
from app.chat.recorder import TurnRecorder, record_turn
from app.chat.tool_messages import local_turn
from app.chat.tool_set import make_tool_set
from app.engine.message import MessageBody, ToolCall
from app.engine.sampling import GenerationSettings
from app.history import export
from app.history.records import JSON_REPLY
from app.history.store import Store

CALC = make_tool_set(["calculator"], (), "required")


def greedy(n: int = 48) -> GenerationSettings:
    return GenerationSettings(max_tokens=n, temperature=0.0, seed=1)


def test_a_required_call_comes_back_as_a_call_not_as_text(engine):
    r = engine.reply([], "What is 17 times 23?", greedy(), tools=CALC.calls(0))
    assert r.text == "" and len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call.name == "calculator" and call.id.startswith("call_")
    assert isinstance(json.loads(call.arguments)["expression"], str)  # held to the tool's parameters


def test_the_history_goes_to_the_model_in_the_servers_tool_format():
    call = ToolCall("call_9", "calculator", '{"expression": "17 * 23"}')
    history = [MessageBody("user", "What is 17 times 23?"), MessageBody("assistant", "", (call,)),
               MessageBody("tool", "391", tool_call_id="call_9", tool_name="calculator")]
    turn = local_turn(history, None, "Be brief.", greedy(), CALC.calls(1))
    assert turn.system.startswith("You have these tools:") and turn.system.endswith("Be brief.")
    assert json.loads(turn.history[1].content) == {"tool_calls": [{"name": "calculator",
                                                                   "arguments": {"expression": "17 * 23"}}]}
    assert "The tool calculator returned: 391" in turn.user_text  # the result is the turn to answer
    assert [m.role for m in turn.history] == ["user", "assistant"]
    assert turn.settings.constraint is not None and turn.settings.constraint.kind == "json_schema"


def test_a_turn_runs_the_builtin_tool_and_ends_in_an_answer_all_recorded(engine):
    with Store.open() as store:
        rec = TurnRecorder(store)
        first = record_turn(rec, engine, None, "What is 17 times 23?", greedy(), tools=CALC.calls(0),
                            tool_set=CALC.to_json())
        cid = first.conversation_id
        shown = []

        def again(_done, calls):
            return record_turn(rec, engine, cid, None, greedy(24), tools=calls).reply

        def saved(call, result):
            shown.append((call.name, result))
            rec.tool_result(cid, call, result)
        replies, waiting = tool_loop.follow(first.reply, CALC, again, on_result=saved)
        conv = store.get_conversation(cid)
    assert waiting == [] and replies[0].tool_calls and not replies[-1].tool_calls
    assert 2 <= len(replies) <= 4  # bounded: the last reply the loop allows has no tools
    assert shown and all(name == "calculator" and result for name, result in shown)
    roles = [m.role for m in conv.messages]
    assert roles[:3] == ["user", "assistant", "tool"] and roles[-1] == "assistant"
    assert conv.messages[1].tool_calls == replies[0].tool_calls  # stored as calls, not text
    assert conv.messages[1].content == "" and conv.tools == CALC.to_json()
    assert conv.messages[2].tool_call_id == replies[0].tool_calls[0].id
    assert conv.messages[2].content == shown[0][1]


def test_a_declared_tools_call_waits_for_the_users_result(engine):
    weather = make_tool_set([], json.loads('[{"type": "function", "function": {"name": "get_weather", '
                                           '"parameters": {"type": "object", "properties": {"city": '
                                           '{"type": "string", "maxLength": 12}}}}}]'), "required")
    r = engine.reply([], "Weather in Paris?", greedy(), tools=weather.calls(0))
    replies, waiting = tool_loop.follow(r, weather, lambda *_: pytest.fail("asked again without a result"))
    assert replies == [r] and [c.name for c in waiting] == ["get_weather"]


def test_a_call_cut_short_by_max_tokens_is_kept_and_shown_as_the_json_it_is(engine):
    with Store.open() as store:
        turn = record_turn(TurnRecorder(store), engine, None, "What is 17 times 23?", greedy(4),
                           tools=CALC.calls(0))
        conv = store.get_conversation(turn.conversation_id)
    r = turn.reply
    assert r.stats.stop_reason == "length" and r.tool_calls == () and r.format == JSON_REPLY
    assert r.text.startswith("{") and conv.messages[1].content == r.text
    assert conv.messages[1].format == JSON_REPLY
    assert "```json\n" in export.render(conv, "md")  # in a JSON box, not as Markdown text
