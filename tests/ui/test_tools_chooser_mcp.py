"""The Tools chooser offers MCP servers: the configured, enabled ones from mcp.json (read when the menu
opens), each with its status from a real McpHub running the real mcp-server-time in its tooltip, and
checking one makes the conversation's ToolSet use it, in the real window and saved with the chat."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from app.chat.tool_set import ToolSet, make_tool_set
from app.history.store import Store
from app.mcp.config import McpConfig, ServerConfig, load_config, save_config
from app.mcp.hub import McpHub
from app.ui.chat.tools_chooser import ToolsChooser
from tests.ui.conftest import small_config

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
SERVERS = McpConfig((ServerConfig("time", TIME_SERVER), ServerConfig("git", "mcp-server-git", enabled=False)))


def test_the_chooser_lists_enabled_servers_with_their_status_and_choosing_one_uses_it(qtbot, tmp_path):
    save_config(SERVERS.with_server(ServerConfig("ghost", str(tmp_path / "no-such-server"))))
    hub = McpHub(load_config())
    try:
        chooser = ToolsChooser()
        qtbot.addWidget(chooser)
        picked: list[ToolSet] = []
        chooser.chosen.connect(picked.append)
        chooser.menu.aboutToShow.emit()  # no hub yet: not started
        assert list(chooser.servers) == ["time", "ghost"]  # git is switched off in Settings
        assert chooser.servers["time"].text() == "time (MCP)"
        assert chooser.servers["time"].toolTip().startswith("MCP server time: not started")
        chooser.set_mcp(hub)
        states = hub.ensure(["time", "ghost"])
        state = states["time"]
        assert state.status == "ready" and states["ghost"].status == "failed"
        chooser.menu.aboutToShow.emit()
        n = len(state.tools)
        assert chooser.servers["time"].toolTip() == f"MCP server time: ready · {n} tools"
        assert chooser.servers["time"].text() == "time (MCP)"
        assert chooser.servers["ghost"].text() == "ghost (MCP · failed)"
        assert chooser.servers["ghost"].toolTip() == f"MCP server ghost: failed: {states['ghost'].error}"
        chooser.builtin["calculator"].setChecked(True)
        chooser.servers["time"].setChecked(True)
        assert picked[-1].mcp == ("time",) and picked[-1].builtin == ("calculator",)
        assert "time (MCP)" in chooser.button.toolTip()
        chooser.servers["time"].setChecked(False)
        assert picked[-1].mcp == () and picked[-1].builtin == ("calculator",)

        count = len(picked)
        chooser.show_tools(replace(ToolSet(), mcp=("fetch",)))  # a server removed since: still listed
        chooser.menu.aboutToShow.emit()
        assert len(picked) == count and list(chooser.servers) == ["time", "ghost", "fetch"]
        assert chooser.servers["fetch"].isChecked() and not chooser.servers["time"].isChecked()
        assert "no longer configured" in chooser.servers["fetch"].toolTip()
        chooser.servers["fetch"].setChecked(False)
        assert picked[-1].mcp == ()
    finally:
        hub.close()


def test_a_broken_mcp_json_is_said_in_the_menu(qtbot):
    from app.mcp.config import config_path

    config_path().write_text('{"mcpServers": [')
    chooser = ToolsChooser()
    qtbot.addWidget(chooser)
    chooser.menu.aboutToShow.emit()
    assert chooser.servers == {} and chooser.servers_note.isVisible()
    assert str(config_path()) in chooser.servers_note.toolTip()


def test_choosing_a_server_in_the_window_changes_the_conversations_tools(qtbot, make_window):
    save_config(SERVERS)
    win = make_window(small_config(max_tokens=8))
    win.composer.set_text("Hi")  # a stored conversation: a change of its tools is saved at once
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        win.flow.send()
    win.tools.menu.aboutToShow.emit()
    assert list(win.tools.servers) == ["time"] and not win.tools.servers["time"].isChecked()
    win.tools.servers["time"].setChecked(True)
    assert win.flow.conversation.tools.mcp == ("time",)
    cid = win.flow.conversation.id
    with Store.open() as s:
        stored = ToolSet.from_json(s.get_conversation(cid).tools)
    assert stored.mcp == ("time",)
    win.new_chat()
    assert not win.tools.servers["time"].isChecked()
    win.history.open(cid)
    assert win.tools.servers["time"].isChecked() and win.tools.tools.mcp == ("time",)


def test_a_builtin_changed_before_the_menu_listed_the_servers_keeps_them(qtbot):
    chooser = ToolsChooser()
    qtbot.addWidget(chooser)
    picked: list[ToolSet] = []
    chooser.chosen.connect(picked.append)
    chooser.show_tools(make_tool_set([], (), "auto", ("time",)))
    chooser.builtin["calculator"].setChecked(True)
    assert (picked[-1].builtin, picked[-1].mcp) == (("calculator",), ("time",))
