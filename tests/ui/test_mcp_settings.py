"""Settings > Tools with real MCP servers: mcp-server-time added through the dialog and checked on a
real McpHub (its tools, their descriptions and their cost in the real model's tokens), a tool switched
off and saved, a server that cannot start, and an always-allow decision revoked (real files under the
test's XDG dirs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialogButtonBox

from app.chat.tool_cost import definitions_tokens
from app.config import AppConfig
from app.mcp.approvals import Approvals
from app.mcp.config import McpConfig, ServerConfig, config_path, load_config, save_config
from app.mcp.hub import McpHub
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.mcp_page import loaded_counter
from tests.ui.conftest import small_config

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


@pytest.fixture
def hub():
    h = McpHub(McpConfig())
    yield h
    h.close()


@pytest.fixture
def count(engine):
    return lambda text: len(engine.decoder.tokenize(text, add_bos=False, special=True))


def ok(dlg):
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()


def tool_rows(page) -> dict[str, tuple[str, Qt.CheckState]]:
    items = [page.tools.topLevelItem(i) for i in range(page.tools.topLevelItemCount())]
    return {i.text(0): (i.text(1), i.checkState(0)) for i in items}


def test_mcp_server_time_added_checked_its_tools_costed_and_one_switched_off(qtbot, hub, count):
    dlg = SettingsDialog(AppConfig(), mcp=hub, count_tokens=count)
    qtbot.addWidget(dlg)
    dlg.show()
    page = dlg.mcp
    assert dlg.tabs.tabText(dlg.tabs.indexOf(page)) == "Tools"
    assert page.servers.count() == 0 and not page.check_button.isEnabled()
    form = page.add_server()
    form.name.setText("time")
    form.command.setText(TIME_SERVER)
    form.args.setText("--local-timezone 'Asia/Tokyo'")
    ok(form)
    added = ServerConfig("time", TIME_SERVER, ("--local-timezone", "Asia/Tokyo"))
    assert load_config() == McpConfig((added,))
    assert page.current_name() == "time" and page.status.text().startswith("not started")

    page.check_button.click()
    assert page.status.text() == "Checking…" and not page.check_button.isEnabled()
    qtbot.waitUntil(lambda: page.status.text().startswith("ready"), timeout=30_000)
    state = hub.states()["time"]
    assert state.status == "ready" and page.status.text() == f"ready · {len(state.tools)} tools"
    rows = tool_rows(page)
    assert {"get_current_time", "convert_time"} <= set(rows)
    for tool in state.tools:  # the server's own descriptions, each tool on
        assert rows[tool.name] == (" ".join(tool.description.split()), Qt.CheckState.Checked)
        assert tool.description
    every = definitions_tokens(count, [t.definition() for t in state.tools])
    assert every > 50
    assert f"{len(state.tools)} of {len(state.tools)} tools on" in page.cost.text()
    assert f"take {every:,} prompt tokens" in page.cost.text()

    item = page.tools.findItems("convert_time", Qt.MatchFlag.MatchExactly, 0)[0]
    item.setCheckState(0, Qt.CheckState.Unchecked)
    saved = json.loads(config_path().read_text())["mcpServers"]["time"]
    assert saved["disabledTools"] == ["convert_time"] and saved["command"] == TIME_SERVER
    assert load_config().get("time").disabled_tools == ("convert_time",)
    rest = definitions_tokens(count, [t.definition() for t in state.tools if t.name != "convert_time"])
    assert 0 < rest < every and f"take {rest:,} prompt tokens" in page.cost.text()
    assert tool_rows(page)["convert_time"][1] == Qt.CheckState.Unchecked  # redrawn from the saved file

    page.trusted.setChecked(True)
    assert load_config().get("time").trusted
    dlg.reject()


def test_a_server_whose_command_does_not_exist_fails_in_one_line(qtbot, hub, tmp_path):
    missing = tmp_path / "no-such-mcp-server"
    save_config(McpConfig((ServerConfig("ghost", str(missing)),)))
    hub.set_config(load_config())
    dlg = SettingsDialog(AppConfig(), mcp=hub)
    qtbot.addWidget(dlg)
    dlg.show()
    page = dlg.mcp
    assert page.current_name() == "ghost"
    page.check_button.click()
    qtbot.waitUntil(lambda: page.status.text().startswith("failed"), timeout=30_000)
    text = page.status.text()
    assert "\n" not in text and text == f"failed: {hub.states()['ghost'].error}"
    assert page.servers.item(0).text() == "ghost · failed" and page.servers.item(0).toolTip() == text
    assert page.tools.topLevelItemCount() == 0 and page.check_button.text() == "Check again"
    assert "no local model is loaded" not in page.cost.text()
    page.enabled.setChecked(False)  # switched off: saved, and never started again
    assert not load_config().get("ghost").enabled and not page.check_button.isEnabled()
    assert page.servers.item(0).text() == "ghost · off"
    dlg.reject()


def test_a_cost_without_a_model_says_so(qtbot, hub):
    save_config(McpConfig((ServerConfig("time", TIME_SERVER),)))
    hub.set_config(load_config())
    hub.ensure(["time"])
    dlg = SettingsDialog(AppConfig(), mcp=hub)  # opened with no model loaded
    qtbot.addWidget(dlg)
    n = len(hub.states()["time"].tools)
    assert dlg.mcp.status.text() == f"ready · {n} tools"
    cost = dlg.mcp.cost.text()
    assert cost.startswith(f"{n} of {n} tools on") and "no local model is loaded" in cost
    dlg.reject()


def test_an_always_allowed_tool_is_listed_and_revoked(qtbot):
    Approvals.load().allow_always("time", "get_current_time")
    Approvals.load().allow_always("git", "git_status")
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    allowed = dlg.mcp.allowed
    shown = sorted(allowed.item(i).text() for i in range(allowed.count()))
    assert shown == ["git / git_status", "time / get_current_time"]
    assert not dlg.mcp.revoke_button.isEnabled()
    allowed.setCurrentRow([allowed.item(i).text() for i in range(allowed.count())].index(
        "time / get_current_time"))
    dlg.mcp.revoke_button.click()
    again = Approvals.load()
    assert not again.allowed("time", "get_current_time") and again.allowed("git", "git_status")
    assert [allowed.item(i).text() for i in range(allowed.count())] == ["git / git_status"]
    dlg.mcp.allowed.setCurrentRow(0)
    dlg.mcp.revoke_button.click()
    assert Approvals.load().entries() == [] and allowed.item(0).text().startswith("None")
    dlg.reject()


def test_the_windows_settings_use_its_runner_and_its_loaded_model(qtbot, make_window, count):
    save_config(McpConfig((ServerConfig("time", TIME_SERVER),)))
    win = make_window(small_config(max_tokens=4))
    win.mcp.approvals.allow_always("time", "convert_time")
    seen: dict = {}

    def in_the_dialog() -> None:  # open_settings runs the dialog modally: act from inside it
        dlg = seen["dlg"] = win.findChild(SettingsDialog)
        page = dlg.mcp
        page.trusted.setChecked(True)
        page.check_button.click()
        qtbot.waitUntil(lambda: page.status.text().startswith("ready"), timeout=30_000)
        tools = win.mcp.hub.states()["time"].tools  # the window's hub started it
        seen["tokens"] = definitions_tokens(count, [t.definition() for t in tools])  # the model loaded apart
        seen["cost"] = page.cost.text()
        page.allowed.setCurrentRow(0)
        page.revoke_button.click()
        dlg.reject()

    QTimer.singleShot(0, in_the_dialog)
    win.open_settings()
    assert f"take {seen['tokens']:,} prompt tokens" in seen["cost"]
    assert not win.mcp.approvals.allowed("time", "convert_time")  # the chat's own decisions, revoked
    assert win.mcp.config.get("time").trusted  # the runner holds what was saved
    assert win.tools.mcp is win.mcp
    win.tools.menu.aboutToShow.emit()
    n = len(win.mcp.states()["time"].tools)
    assert win.tools.servers["time"].toolTip() == f"MCP server time: ready · {n} tools"
    assert loaded_counter(None) is None
