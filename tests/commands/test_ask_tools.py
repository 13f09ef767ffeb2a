"""`llamadesk ask --tools/--builtin-tools`: calls printed as what they are, built-in tools run, a declared
tool's result given back with --continue --tool-result; through the real command on the real model."""

from __future__ import annotations

import json

import pytest

from app.history.store import Store
from tests.commands.test_cli_history import llamadesk, one_line_error

WEATHER = json.dumps([{"type": "function", "function": {
    "name": "get_weather", "description": "today's weather in a city",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                   "properties": {"city": {"type": "string", "maxLength": 12}}}}}])


def model_args(model_path, n: int = 40) -> list[str]:
    return ["--model", str(model_path), "--ctx", "1024", "--temperature", "0", "--max-tokens", str(n)]


def test_builtin_tools_run_and_the_call_prints_as_the_tool_and_its_arguments(model_path):
    r = llamadesk("ask", "What is 17 times 23?", "--builtin-tools", "--tool-choice", "calculator",
                  *model_args(model_path))
    assert r.returncode == 0, r.stderr
    assert "→ tool call: calculator\n    {\n      \"expression\": " in r.stdout
    assert "← calculator returned:\n    " in r.stdout
    assert '{"tool_calls"' not in r.stdout  # never the tool format's raw JSON
    with Store.open() as s:
        conv = s.get_conversation(s.list_conversations()[0].id)
    roles = [m.role for m in conv.messages]
    assert roles[:3] == ["user", "assistant", "tool"] and roles[-1] == "assistant"
    assert conv.messages[1].tool_calls[0].name == "calculator" and conv.messages[2].tool_name == "calculator"
    assert conv.tools["builtin"] == ["calculator", "current_time"]


def test_a_declared_tools_call_waits_and_its_result_continues_the_conversation(model_path):
    r = llamadesk("ask", "Weather in Paris?", "--tools", WEATHER, "--tool-choice", "required", "--json",
                  *model_args(model_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["waiting_for"] == ["get_weather"] and out["tool_calls"][0]["result"] is None
    assert isinstance(out["tool_calls"][0]["arguments"]["city"], str)  # parsed, not a JSON string
    cid = out["conversation"]
    r = llamadesk("ask", "-", "--continue", str(cid), "--tool-result", "Sunny, 24 °C", "--json",
                  *model_args(model_path, 16))
    assert r.returncode == 0, r.stderr
    with Store.open() as s:
        conv = s.get_conversation(cid)
    tool = next(m for m in conv.messages if m.role == "tool")
    assert (tool.content, tool.tool_name) == ("Sunny, 24 °C", "get_weather")
    assert tool.tool_call_id == out["tool_calls"][0]["id"] and conv.messages[-1].role == "assistant"
    again = llamadesk("ask", "-", "--continue", str(cid), "--tool-result", "x", *model_args(model_path))
    assert "has no tool call waiting for a result" in one_line_error(again)


@pytest.mark.parametrize("args, says", [
    (["--tool-choice", "required"], "--tool-choice needs tools"),
    (["--tools", "[{"], "the tools are not JSON: Expecting property name"),
    (["--tools", "/no/such/tools.json"], "/no/such/tools.json: cannot read it"),
    (["--tools", '[{"type": "function", "function": {"name": "calculator"}}]', "--builtin-tools"],
     "two tools are named 'calculator'"),
    (["--builtin-tools", "--tool-choice", "shell"], "tool choice 'shell' is none of"),
    (["--builtin-tools", "--json-object"], "tools hold the reply to the tool format"),
    (["--tool-result", "42"], "--tool-result records a waiting call's result"),
])
def test_bad_tool_arguments_are_one_line(args, says):
    assert says in one_line_error(llamadesk("ask", "hi", "--model", "/nonexistent.gguf", *args))
