"""A conversation's MCP servers in its ToolSet: saved by name, old stored sets still read."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.chat.tool_set import ToolSet, ToolSetError, make_tool_set


def test_servers_are_saved_and_read_back():
    tools = make_tool_set(["calculator"], (), "required", mcp=["time", "git", "time"])
    assert tools.mcp == ("time", "git")  # once each, in the order chosen
    stored = tools.to_json()
    assert stored["mcp"] == ["time", "git"]
    back = ToolSet.from_json(stored)
    assert back == tools and back.mcp == ("time", "git") and back.choice == "required"


def test_a_set_without_servers_is_stored_as_before():
    old = {"builtin": ["calculator"], "declared": [], "choice": "auto"}
    tools = ToolSet.from_json(old)
    assert tools.mcp == () and tools.to_json() == old
    assert ToolSet.from_json(None) == ToolSet()


def test_servers_alone_are_tools_to_save_and_use():
    tools = replace(ToolSet(), mcp=("time",))
    assert tools.to_json() == {"builtin": [], "declared": [], "choice": "auto", "mcp": ["time"]}
    assert tools.active
    # nothing resolved yet (the server has not started): the reply is plain text
    assert tools.calls(0) is None
    assert tools.label() == "time"


def test_a_bad_stored_server_list_is_one_line():
    with pytest.raises(ToolSetError) as e:
        ToolSet.from_json({"builtin": [], "mcp": [3]})
    assert "MCP servers" in str(e.value) and "\n" not in str(e.value)


def test_a_choice_may_name_a_tool_a_server_gives():
    tools = make_tool_set((), (), "get_current_time", mcp=["time"])
    assert tools.choice == "get_current_time"
    with pytest.raises(ToolSetError):
        make_tool_set((), (), "get_current_time")
