"""Tools on a remote engine: sent as OpenAI's `tools`, the streamed `tool_calls` read back as calls,
and the results sent as `tool` messages; against `llamadesk serve` (a real server that takes tools)."""

from __future__ import annotations

import json
import tempfile

import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.chat.tool_set import make_tool_set
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.tool_deltas import ToolCallDeltas
from tests.serve.conftest import start_serve

CALC = make_tool_set(["calculator"], (), "required")


@pytest.fixture(scope="module")
def served(model_path):
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-tools-"))
    yield srv
    srv.stop()


def test_a_servers_streamed_tool_calls_come_back_as_calls_and_results_go_as_tool_messages(served):
    eng = RemoteChatEngine(Endpoint.parse(served.base + "/v1"))
    try:
        s = GenerationSettings(max_tokens=48, temperature=0.0, seed=1)
        r = eng.reply([], "What is 17 times 23?", s, tools=CALC.calls(0))
        assert r.text == "" and [c.name for c in r.tool_calls] == ["calculator"]
        assert isinstance(json.loads(r.tool_calls[0].arguments)["expression"], str)
        assert r.stats.ttft_s is not None and r.stats.error is None
        history = [MessageBody("user", "What is 17 times 23?"),
                   MessageBody("assistant", "", r.tool_calls),
                   MessageBody("tool", "391", tool_call_id=r.tool_calls[0].id, tool_name="calculator")]
        wire = eng.messages(history, None, None)
        assert wire[1]["tool_calls"][0]["function"]["name"] == "calculator" and wire[2]["role"] == "tool"
        after = eng.reply(history, None, GenerationSettings(max_tokens=12, temperature=0.0))
        assert after.tool_calls == () and after.stats.error is None  # the server took the tool turn
    finally:
        eng.close()


def test_streamed_call_pieces_are_joined_and_bad_ones_named():
    d = ToolCallDeltas()
    first = {"index": 0, "id": "call_a", "function": {"name": "f", "arguments": ""}}
    assert d.feed({"tool_calls": [first]}) is None
    assert d.feed({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}) is None
    assert d.feed({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}) is None
    assert d.calls() == [("call_a", "f", '{"x": 1}')]
    assert d.feed({"tool_calls": {"index": 0}}) == "'tool_calls' is not a list"
    assert d.feed({"tool_calls": [{"index": -1}]}) == "a tool call's index is not a small whole number"
    assert d.feed({"tool_calls": [{"index": 1, "function": {"arguments": 5}}]}) == \
        "a tool call's arguments are not text"
