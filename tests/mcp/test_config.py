"""mcp.json in Claude Desktop's form, LlamaDesk's keys beside; other apps' files read, never written."""

from __future__ import annotations

import json
import os

import pytest

from app.mcp.config import (
    McpConfig,
    McpConfigError,
    ServerConfig,
    config_path,
    importable,
    load_config,
    read_foreign,
    save_config,
)

CLAUDE = {"mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "Europe/Paris"]},
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "secret"}},
    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
    "legacy": {"url": "http://127.0.0.1:8000/sse"},
}, "globalShortcut": "Ctrl+Space"}


def test_the_file_is_in_the_config_folder_and_missing_is_empty(isolated_dirs):
    assert config_path() == isolated_dirs / "xdg_config_home" / "llamadesk" / "mcp.json"
    assert load_config() == McpConfig()


def test_claude_desktops_form_is_read_with_each_transport(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(CLAUDE))
    cfg = load_config(path)
    assert [s.name for s in cfg.servers] == ["time", "github", "remote", "legacy"]
    time_, github, remote, legacy = cfg.servers
    assert (time_.command, time_.args, time_.transport) == ("uvx", ("mcp-server-time", "--local-timezone",
                                                                    "Europe/Paris"), "stdio")
    assert github.env == (("GITHUB_PERSONAL_ACCESS_TOKEN", "secret"),)
    assert (remote.transport, remote.headers) == ("http", (("Authorization", "Bearer x"),))
    assert legacy.transport == "sse"
    assert all(s.enabled and not s.trusted and s.timeout_s == 60.0 for s in cfg.servers)


def test_llamadesk_keys_round_trip_and_keys_it_does_not_know_are_kept(tmp_path):
    path = tmp_path / "mcp.json"
    doc = json.loads(json.dumps(CLAUDE))
    doc["mcpServers"]["time"]["cwd"] = "/srv"  # another client's key
    path.write_text(json.dumps(doc))
    cfg = load_config(path)
    changed = ServerConfig("time", "uvx", ("mcp-server-time",), enabled=False, trusted=True,
                           disabled_tools=("convert_time",), timeout_s=5)
    save_config(cfg.with_server(changed).without("legacy"), path)
    saved = json.loads(path.read_text())
    assert saved["globalShortcut"] == "Ctrl+Space"
    assert list(saved["mcpServers"]) == ["time", "github", "remote"]  # replaced in place
    assert saved["mcpServers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"], "enabled": False,
                                          "trusted": True, "disabledTools": ["convert_time"], "timeout": 5.0,
                                          "cwd": "/srv"}
    again = load_config(path)
    assert again.get("time") == changed and again.get("github") == cfg.get("github")
    assert again.get("legacy") is None


@pytest.mark.parametrize("text, fault", [
    ('{"mcpServers": {"time": {"command": "uvx",}}}', "is not valid JSON"),
    ("[1, 2]", 'must hold an object with "mcpServers"'),
    ('{"mcpServers": []}', '"mcpServers" must be an object'),
    ('{"mcpServers": {"t": {"args": ["x"]}}}', 'server "t": give either "command"'),
    ('{"mcpServers": {"t": {"command": "x", "url": "http://a"}}}', 'server "t": give either'),
    ('{"mcpServers": {"t": {"command": "x", "args": "--flag"}}}', 'server "t": "args" must be a list'),
    ('{"mcpServers": {"t": {"command": "x", "env": {"A": 1}}}}', 'server "t": "env" must be an object of'),
    ('{"mcpServers": {"t": {"url": "ftp://a"}}}', '"url" must start with http'),
    ('{"mcpServers": {"t": {"command": "x", "timeout": 0}}}', '"timeout" must be a number'),
    ('{"mcpServers": {"t": {"command": "x", "trusted": "yes"}}}', '"trusted" must be true or false'),
])
def test_a_broken_file_is_one_line_naming_it_and_is_never_written_over(tmp_path, text, fault):
    path = tmp_path / "mcp.json"
    path.write_text(text)
    with pytest.raises(McpConfigError) as e:
        load_config(path)
    line = str(e.value)
    assert line.startswith(f"{path}: ") and fault in line and "\n" not in line
    with pytest.raises(McpConfigError):
        save_config(McpConfig((ServerConfig("new", "x"),)), path)
    assert path.read_text() == text


def test_a_fifo_in_its_place_is_refused_without_hanging(tmp_path):
    path = tmp_path / "mcp.json"
    os.mkfifo(path)
    with pytest.raises(McpConfigError, match="cannot be read"):
        load_config(path)


def test_claude_desktop_and_lm_studio_files_are_found_and_only_read(isolated_dirs):
    assert importable() == []
    claude = isolated_dirs / "xdg_config_home" / "Claude" / "claude_desktop_config.json"
    lmstudio = isolated_dirs / ".lmstudio" / "mcp.json"
    for p in (claude, lmstudio):
        p.parent.mkdir(parents=True)
    doc = json.loads(json.dumps(CLAUDE))
    doc["mcpServers"]["time"]["trusted"] = True  # trust is LlamaDesk's to give, never imported
    claude.write_text(json.dumps(doc))
    fetch = {"command": "uvx", "args": ["mcp-server-fetch"]}
    lmstudio.write_text(json.dumps({"mcpServers": {"fetch": fetch}}))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (claude, lmstudio)}
    assert importable() == [("Claude Desktop", claude), ("LM Studio", lmstudio)]
    servers = read_foreign(claude)
    assert [s.name for s in servers] == ["time", "github", "remote", "legacy"]
    assert not any(s.trusted for s in servers)
    assert [s.name for s in read_foreign(lmstudio)] == ["fetch"]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (claude, lmstudio)} == before
    with pytest.raises(McpConfigError, match="no such file"):
        read_foreign(isolated_dirs / "nothing.json")


def test_claude_desktop_is_looked_for_where_each_platform_keeps_it(isolated_dirs, monkeypatch):
    from app.mcp import config

    monkeypatch.setattr(config.sys, "platform", "darwin")
    mac = isolated_dirs / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    assert config.foreign_places()[0] == ("Claude Desktop", mac)
    monkeypatch.setattr(config.sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(isolated_dirs / "Roaming"))
    name = "claude_desktop_config.json"
    assert config.foreign_places()[0][1] == isolated_dirs / "Roaming" / "Claude" / name
    monkeypatch.setattr(config.sys, "platform", "linux")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert config.foreign_places()[0][1] == isolated_dirs / ".config" / "Claude" / name
    assert config.foreign_places()[1] == ("LM Studio", isolated_dirs / ".lmstudio" / "mcp.json")


def test_transport_follows_the_url():
    assert ServerConfig("a", "cmd").transport == "stdio"
    assert ServerConfig("a", url="https://h/mcp").transport == "http"
    assert ServerConfig("a", url="https://h/sse").transport == "sse"
    assert ServerConfig("a", url="https://h/sse/?key=1").transport == "sse"
    assert ServerConfig("a", url="https://h/sse-tools/mcp").transport == "http"
