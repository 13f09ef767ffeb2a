"""Settings > Tools and the files around it: a Claude Desktop config offered for import (and left byte
for byte as it was), a broken mcp.json said in one line and kept until a change is saved, and the
server dialog refusing what cannot make a server in one line, everything typed kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtWidgets import QDialogButtonBox

from app.config import AppConfig
from app.mcp.config import config_path, load_config
from app.ui.settings.dialog import SettingsDialog
from app.ui.settings.mcp_server_dialog import McpServerDialog

CLAUDE = {"mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time"]},
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/my docs"],
              "env": {"DEBUG": "1"}, "trusted": True},
}, "globalShortcut": "Ctrl+Space"}


def ok(dlg):
    dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()


def claude_file() -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(CLAUDE, indent=1))
    return path


def test_a_claude_desktop_config_is_offered_imported_and_never_written(qtbot):
    theirs = claude_file()
    before = theirs.read_bytes()
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    page = dlg.mcp
    assert [b.text() for b in page.import_buttons] == ["Import 2 servers from Claude Desktop"]
    assert str(theirs) in page.import_buttons[0].toolTip()
    page.import_buttons[0].click()
    cfg = load_config()
    assert [s.name for s in cfg.servers] == ["time", "files"]
    files = cfg.get("files")
    assert files.args[-1] == "/tmp/my docs" and files.env == (("DEBUG", "1"),)
    assert not files.trusted  # trust is LlamaDesk's to give, never imported
    assert page.import_buttons == [] and page.servers.count() == 2
    assert theirs.read_bytes() == before
    dlg.reject()
    again = SettingsDialog(AppConfig())  # LlamaDesk has servers now: no offer
    qtbot.addWidget(again)
    assert again.mcp.import_buttons == []
    assert theirs.read_bytes() == before


def test_a_broken_mcp_json_is_said_in_one_line_and_kept_until_a_change_is_saved(qtbot):
    path = config_path()
    broken = b'{"mcpServers": {"time": {"command": "uvx",}}}'
    path.write_bytes(broken)
    claude_file()  # an import would overwrite it: not offered while it is broken
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    dlg.show()
    page = dlg.mcp
    text = page.file_error.text()
    assert not page.file_error.isHidden() and "\n" not in text
    assert str(path) in text and "not valid JSON" in text and "until you save a change" in text
    assert page.import_buttons == [] and page.servers.count() == 0
    assert path.read_bytes() == broken
    form = page.add_server()
    form.name.setText("time")
    form.command.setText("uvx")
    form.args.setText("mcp-server-time")
    ok(form)
    assert [s.name for s in load_config().servers] == ["time"]
    assert path.with_name("mcp.json.broken").read_bytes() == broken
    assert page.file_error.isHidden()
    dlg.reject()


def test_the_server_dialog_refuses_in_one_line_and_keeps_what_was_typed(qtbot):
    dlg = McpServerDialog(taken=["time"])
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.command.isVisible() and not dlg.url.isVisible()

    def refused(needle: str) -> None:
        ok(dlg)
        assert dlg.isVisible() and dlg.server is None
        assert needle in dlg.error.text() and "\n" not in dlg.error.text()

    refused("give the server a name")
    dlg.name.setText("time")
    refused("'time' is already configured")
    dlg.name.setText("clock")
    refused("give the command")
    dlg.command.setText("uvx")
    dlg.args.setText('mcp-server-time "unclosed')
    refused("the arguments cannot be split")
    dlg.args.setText("mcp-server-time")
    dlg.env.setPlainText("TZ=Asia/Tokyo\nnot a pair")
    refused("environment, line 2")
    assert dlg.env.toPlainText() == "TZ=Asia/Tokyo\nnot a pair" and dlg.name.text() == "clock"
    dlg.kind.setCurrentIndex(1)
    assert dlg.url.isVisible() and not dlg.command.isVisible()
    dlg.url.setText("ftp://example")
    refused("must start with http://")
    dlg.url.setText("http://127.0.0.1:9/mcp")
    dlg.headers.setPlainText("Authorization: Bearer abc:def")
    ok(dlg)
    s = dlg.server
    assert not dlg.isVisible() and s is not None
    assert (s.name, s.url, s.command, s.headers) == ("clock", "http://127.0.0.1:9/mcp", None,
                                                     (("Authorization", "Bearer abc:def"),))
    assert s.transport == "http"


def test_an_edit_keeps_the_servers_place_and_its_switches(qtbot):
    from app.mcp.config import McpConfig, ServerConfig, save_config

    save_config(McpConfig((ServerConfig("a", "uvx", ("one",)),
                           ServerConfig("b", "uvx", ("two",), enabled=False, disabled_tools=("x",)),
                           ServerConfig("c", "uvx"))))
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    page = dlg.mcp
    page.servers.setCurrentRow(1)
    form = page.edit_server()
    assert (form.name.text(), form.command.text(), form.args.text()) == ("b", "uvx", "two")
    form.name.setText("b2")
    form.args.setText("two 'and a half'")
    ok(form)
    cfg = load_config()
    assert [s.name for s in cfg.servers] == ["a", "b2", "c"]
    b2 = cfg.get("b2")
    assert b2.args == ("two", "and a half") and not b2.enabled and b2.disabled_tools == ("x",)
    assert page.current_name() == "b2" and page.servers.item(1).text() == "b2 · off"
    page.remove_button.click()
    assert [s.name for s in load_config().servers] == ["a", "c"]
    dlg.reject()
