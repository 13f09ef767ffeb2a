"""A turn's MCP tools resolved from real servers (the time server and a scripted one over stdio): names
kept unless two tools share one, disabled tools and failed servers left out, calls routed back to their
server; the approval policy and the cards that show an MCP call's answer."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from app.chat.mcp_calls import (
    BAD_ARGUMENTS,
    CANCELLED,
    DENIED,
    allowed_without_asking,
    answer,
    arguments,
    tool_message,
)
from app.chat.tool_cost import crowding
from app.chat.tool_loop import follow
from app.chat.tool_set import McpFunction, ToolSet, make_tool_set
from app.engine.message import MessageBody, ToolCall
from app.mcp.approvals import Approvals
from app.mcp.config import McpConfig, ServerConfig
from app.mcp.hub import CallResult, McpHub
from app.rendering.tool_parts import message_markdown
from tests.mcp.conftest import hostile, program


@pytest.fixture(scope="module")
def servers():
    cfg = McpConfig((ServerConfig("time", program("mcp-server-time")),
                     hostile("a", "many", "2"), hostile("b", "many", "3", disabled_tools=("tool_002",)),
                     ServerConfig("gone", sys.executable, ("-c", "raise SystemExit(1)"))))
    hub = McpHub(cfg)
    states = hub.ensure(["time", "a", "b", "gone"])
    yield hub, cfg, states
    hub.close()


def test_names_are_kept_unless_two_tools_share_one(servers):
    _hub, cfg, states = servers
    tools = make_tool_set(["current_time"], (), "auto", mcp=["time", "a", "b", "gone"]).with_mcp(states, cfg)
    names = {f.function: (f.server, f.tool) for f in tools.resolved}
    assert states["gone"].status == "failed" and states["gone"].error
    assert names == {"get_current_time": ("time", "get_current_time"),
                     "convert_time": ("time", "convert_time"),
                     "a__tool_000": ("a", "tool_000"), "a__tool_001": ("a", "tool_001"),
                     "b__tool_000": ("b", "tool_000"), "b__tool_001": ("b", "tool_001")}  # b's tool_002: off
    assert [d["function"]["name"] for d in tools.definitions()][:1] == ["current_time"]
    assert tools.mcp_target("a__tool_001").tool == "tool_001" and tools.mcp_target("current_time") is None
    assert tools.label() == "current_time, time (2 tools), a (2 tools), b (2 tools), gone"
    calls = tools.calls(0)
    assert {t.name for t in calls.tools} == {"current_time", *names}
    assert tools.to_json()["mcp"] == ["time", "a", "b", "gone"] and "resolved" not in tools.to_json()
    assert ToolSet.from_json(tools.to_json()) == tools  # resolved tools are the turn's, never saved


def test_a_tool_clashing_with_a_builtin_is_prefixed(servers):
    _hub, cfg, states = servers
    declared = ({"type": "function", "function": {"name": "get_current_time", "description": "mine",
                                                  "parameters": {"type": "object", "properties": {}}}},)
    tools = make_tool_set((), declared, "auto", mcp=["time"]).with_mcp(states, cfg)
    assert [f.function for f in tools.resolved] == ["time__get_current_time", "convert_time"]


def test_the_loop_hands_mcp_calls_to_the_front_end_and_waits_without_one(servers):
    hub, cfg, states = servers
    tools = make_tool_set((), (), "auto", mcp=["a"]).with_mcp(states, cfg)

    class R:  # a reply as the engine gives it: only what the loop reads
        def __init__(self, calls=()):
            self.tool_calls, self.text = tuple(calls), ""

    call = ToolCall("c1", "tool_001", "{}")
    ran: list[tuple[str, str]] = []

    def run(c, fn):
        ran.append((fn.server, fn.tool))
        return answer(hub.call(fn.server, fn.tool, arguments(c)).result(10))

    replies, left = follow(R([call]), tools, lambda done, _calls: R(), mcp=run)
    assert ran == [("a", "tool_001")] and left == [] and len(replies) == 2
    _replies, left = follow(R([call]), tools, lambda done, _calls: R())
    assert left == [call]  # no front end to ask: it waits, as a declared tool's call does


def test_who_is_asked(tmp_path):
    cfg = McpConfig((ServerConfig("t", "x", trusted=True), ServerConfig("u", "x")))
    approvals = Approvals.load(tmp_path / "a.json")
    assert allowed_without_asking(cfg, approvals, "t", "anything")
    assert not allowed_without_asking(cfg, approvals, "u", "read")
    assert allowed_without_asking(cfg, approvals, "u", "read", ["u/read"])
    assert allowed_without_asking(cfg, approvals, "u", "write", ["u"])
    assert not allowed_without_asking(cfg, approvals, "u", "write", ["u/read"])
    approvals.allow_always("u", "read")
    assert allowed_without_asking(cfg, Approvals.load(tmp_path / "a.json"), "u", "read")


def test_what_the_model_reads_and_the_card_shows():
    call = ToolCall("c1", "get_current_time", '{"timezone": "Asia/Tokyo"}')
    assert arguments(call) == {"timezone": "Asia/Tokyo"} and arguments(replace(call, arguments="")) == {}
    assert arguments(replace(call, arguments="[1]")) is None
    assert BAD_ARGUMENTS.startswith("The call was not made")
    assert answer(CallResult("time: get_current_time did not answer within 5 s", is_error=True)).startswith(
        "Error: time: ")
    fn = McpFunction("get_current_time", "time", "get_current_time", {})
    msg = tool_message(call, fn, '{"a": 1}')
    assert (msg.role, msg.tool_server, msg.tool_call_id) == ("tool", "time", "c1")
    md = message_markdown(msg, msg.content)
    assert md.startswith("**Result of `get_current_time` from MCP server `time`**")
    denied = message_markdown(replace(msg, content=DENIED), DENIED)
    assert denied.startswith("**Call of `get_current_time` on MCP server `time`: denied**")
    assert DENIED in denied
    assert ": cancelled**" in message_markdown(replace(msg, content=CANCELLED), CANCELLED)
    plain = MessageBody("tool", DENIED, tool_call_id="c1", tool_name="mine")  # a declared tool's: as before
    assert message_markdown(plain, DENIED).startswith("**Result of `mine`**")


def test_the_context_warning():
    assert crowding(400, 8192, 512, 1000) is None
    assert "older messages will be left out sooner" in crowding(4000, 8192, 512, 0)
    assert "are being left out" in crowding(1000, 4096, 512, 3000)
    assert "turn some tools or servers off" in crowding(30_000, 8192, 512, 0)
