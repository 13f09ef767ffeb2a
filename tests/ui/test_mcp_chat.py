"""MCP tools in the real window: mcp-server-time configured, a conversation using it, the bundled model
held to a call (tool choice "required"), the call put to the user in the approval box and run on the real
server when allowed, its answer in the tool result and the reply, the gauges naming what the definitions
cost; Always allow kept, Deny answered as denied, Esc cancelling a call a silent server never answers.
Real model, real servers over stdio, real SQLite, real widgets."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt

from app.chat.mcp_calls import CANCELLED, DENIED
from app.chat.tool_cost import definitions_tokens
from app.chat.tool_set import make_tool_set
from app.history.store import Store
from app.mcp.approvals import Approvals
from tests.mcp.conftest import descendants
from tests.ui.conftest import seed, small_config

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
HOSTILE = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "hostile.py"
QUESTION = "What time is it in Tokyo?"


def write_mcp(servers: dict) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "llamadesk" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.fixture
def time_window(make_window):
    write_mcp({"time": {"command": str(TIME_SERVER), "args": []}})
    win = make_window(small_config(n_ctx=2048, max_tokens=96))
    win.tools.choose(make_tool_set((), (), "required", mcp=["time"]))
    return win


def asked(qtbot, win, timeout: int = 90_000) -> None:
    qtbot.waitUntil(lambda: win.approval.isVisible() and not win.approval.running, timeout=timeout)


def finished(win) -> bool:
    msgs = win.flow.conversation.messages
    return (not win.flow.busy and win.flow._mcp is None and bool(msgs) and msgs[-1].role == "assistant"
            and not msgs[-1].tool_calls)


def answer_every_call(qtbot, win, button, timeout: int = 180_000) -> int:
    """Press `button` each time the box asks, until the turn's last reply; how many times it asked."""
    times = 0

    def step() -> bool:
        nonlocal times
        if win.approval.isVisible() and not win.approval.running and win.approval.call is not None:
            times += 1
            button().click()
        return finished(win)

    qtbot.waitUntil(step, timeout=timeout)
    return times


def time_servers() -> list:
    found = []
    for p in descendants():
        with contextlib.suppress(psutil.Error):
            if "mcp-server-time" in " ".join(p.cmdline()):
                found.append(p)
    return found


def tool_messages(win):
    return [m for m in win.flow.conversation.messages if m.role == "tool"]


def shown(win) -> str:
    return win.view.toPlainText().replace("\xa0", " ")


def test_done_when_the_time_in_tokyo_from_mcp_server_time(qtbot, time_window):
    win = time_window
    win.composer.set_text(QUESTION)
    assert win.flow.send()
    assert "Starting MCP server time" in win.bar.text()  # started off the GUI thread, then sent
    asked(qtbot, win)
    box = win.approval.title.text()
    assert "<b>time</b>" in box and f"<b>{win.approval.function.tool}</b>" in box
    assert win.flow.conversation.messages[0].content == QUESTION

    # the gauges name what the definitions cost, counted by the loaded model's tokenizer
    defs = win.flow.conversation.tools.definitions()
    assert {d["function"]["name"] for d in defs} == {"get_current_time", "convert_time"}
    cost = definitions_tokens(win.flow.count_tokens, defs)
    assert win.gauges.tools.isVisible()
    assert f"tools {cost:,} tok of 2,048" in win.gauges.tools.text() and cost > 100
    assert f"tools {cost:,} of them" in win.gauges.kv_text.text()  # the first prefill read them

    answer_every_call(qtbot, win, lambda: win.approval.allow_once)
    results = tool_messages(win)
    first = results[0]
    call = win.flow.conversation.messages[1].tool_calls[0]
    assert first.tool_server == "time" and first.tool_name == call.name
    got = json.loads(first.content)  # the server's own answer, not ours
    if first.tool_name == "get_current_time":
        assert set(got) >= {"timezone", "datetime", "day_of_week"}
    text = shown(win)
    assert f"Result of {first.tool_name} from MCP server time" in text and got[next(iter(got))] is not None
    reply = win.flow.conversation.messages[-1]
    assert reply.role == "assistant" and reply.content.strip()
    # What the reply says is the model's own (no constraint holds its words); what is sure is that it
    # was given the server's answer: its prompt is the calling reply's, and the result besides.
    calling = win.flow.conversation.messages[1]
    assert reply.stats.prompt_tokens > calling.stats.prompt_tokens + len(calling.tool_calls)
    assert not Path(os.environ["XDG_CONFIG_HOME"], "llamadesk", "mcp-approvals.json").exists()  # once only

    with Store.open() as s:
        conv = s.get_conversation(win.flow.conversation.id)
    stored = [m for m in conv.messages if m.role == "tool"]
    assert [(m.tool_server, m.content) for m in stored] == [(m.tool_server, m.content) for m in results]
    assert conv.tools["mcp"] == ["time"]


def test_always_allow_is_kept_and_not_asked_again(qtbot, time_window):
    win = time_window
    win.composer.set_text(QUESTION)
    win.flow.send()
    asked(qtbot, win)
    tool = win.approval.function.tool
    win.approval.allow_always.click()
    other = lambda: win.approval.isVisible() and win.approval.function.tool != tool
    qtbot.waitUntil(lambda: finished(win) or other(),
                    timeout=180_000)
    kept = json.loads(Path(os.environ["XDG_CONFIG_HOME"], "llamadesk", "mcp-approvals.json").read_text())
    assert kept["always"] == {"time": [tool]} and win.mcp.approvals.allowed("time", tool)
    answer_every_call(qtbot, win, lambda: win.approval.allow_once)
    ran = [m for m in tool_messages(win) if m.tool_name == tool]
    assert ran and all(m.content not in (DENIED, CANCELLED) for m in ran)
    Approvals.load().revoke("time", tool)  # as Settings > Tools does: the window asks again
    assert not win.mcp.approvals.allowed("time", tool)


def test_a_denied_call_is_answered_and_shown_as_denied(qtbot, time_window):
    win = time_window
    win.composer.set_text(QUESTION)
    win.flow.send()
    asked(qtbot, win)
    times = answer_every_call(qtbot, win, lambda: win.approval.deny)
    results = tool_messages(win)
    assert times == len(results) >= 1
    assert all(m.content == DENIED and m.tool_server == "time" for m in results)
    assert re.search(r"Call of \w+ on MCP server time: denied", shown(win))
    assert win.flow.conversation.messages[-1].role == "assistant"  # the model was asked again
    assert time_servers()  # it ran
    win.close()  # the window's hub stops its servers: no process outlives it
    assert not time_servers()


def test_esc_cancels_a_call_that_never_returns(qtbot, make_window):
    write_mcp({"slow": {"command": sys.executable, "args": [str(HOSTILE), "silent"], "trusted": True}})
    win = make_window(small_config(n_ctx=2048, max_tokens=96))
    win.tools.choose(make_tool_set((), (), "required", mcp=["slow"]))
    win.composer.set_text("Do some work.")
    win.flow.send()
    # trusted: no question, the call runs (and the server never answers it)
    qtbot.waitUntil(lambda: win.approval.isVisible() and win.approval.running, timeout=90_000)
    assert "Running" in win.approval.title.text() and "Esc cancels" in win.approval.title.text()
    win.activateWindow()
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Escape)  # the window's Esc
    qtbot.waitUntil(lambda: bool(tool_messages(win)), timeout=10_000)
    first = tool_messages(win)[0]
    assert (first.content, first.tool_server, first.tool_name) == (CANCELLED, "slow", "work")
    assert "Call of work on MCP server slow: cancelled" in shown(win)


def test_a_server_that_fails_to_start_is_one_line_and_the_turn_goes_on(qtbot, make_window):
    write_mcp({"broken": {"command": str(Path(sys.executable).parent / "no-such-mcp-server")}})
    win = make_window(small_config(max_tokens=8))
    win.tools.choose(make_tool_set((), (), "auto", mcp=["broken"]))
    win.composer.set_text("Hello")
    win.flow.send()
    qtbot.waitUntil(lambda: finished(win), timeout=60_000)
    line = win.bar.text()
    assert line.startswith("MCP server broken: ") and "\n" not in line and "goes on without" in line
    assert win.flow.conversation.messages[-1].content.strip() and not win.approval.isVisible()


def test_a_regeneration_in_a_reopened_conversation_starts_its_servers(qtbot, make_window):
    write_mcp({"time": {"command": str(TIME_SERVER), "args": []}})
    cid = seed(QUESTION, "Let me check.")
    with Store.open() as s:
        s.set_tools(cid, make_tool_set((), (), "auto", mcp=["time"]).to_json())
    win = make_window(small_config(max_tokens=8))
    win.history.open(cid)
    assert win.flow.conversation.tools.mcp == ("time",) and win.mcp.states()["time"].status == "stopped"
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        assert win.flow.regenerate()
        assert win.bar.text().startswith("Starting MCP server time: this reply goes without their tools")
    qtbot.waitUntil(lambda: win.mcp.states()["time"].status == "ready", timeout=30_000)
    assert not win.flow.conversation.messages[-1].tool_calls  # it went as text
    assert win.flow._tools_starting() is False  # started: the next question goes at once, with the tools
