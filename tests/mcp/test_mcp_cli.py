"""`llamadesk mcp` run as a real subprocess, XDG_CONFIG_HOME pointing at the test's own mcp.json."""

from __future__ import annotations

import json
import subprocess
import sys

from app.mcp.config import config_path, load_config
from tests.mcp.conftest import SERVERS, program


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "mcp", *args], capture_output=True, text=True,
                          timeout=timeout)


def _hostile(mode: str, *args: str) -> dict:
    return {"command": sys.executable, "args": [str(SERVERS / "hostile.py"), mode, *args]}


def _write(servers: dict) -> None:
    config_path().write_text(json.dumps({"mcpServers": servers}))


def test_list_shows_status_tools_errors_and_what_the_definitions_cost(model_path):
    _write({"time": {"command": program("mcp-server-time")},
            "hundred": _hostile("many", "100"),
            "five-hundred": _hostile("many", "500"),
            "mute": _hostile("silent-start"),
            "junk": _hostile("garbage"),
            "off": {"command": program("mcp-server-time"), "enabled": False},
            "half": {**_hostile("many", "4"), "disabledTools": ["tool_000", "tool_001"]}})
    r = _cli("list", "--json", "--model", str(model_path), "--timeout", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["config"] == str(config_path())
    rows = {s["name"]: s for s in out["servers"]}
    assert list(rows) == ["time", "hundred", "five-hundred", "mute", "junk", "off", "half"]
    time_ = rows["time"]
    assert (time_["status"], time_["transport"], time_["error"]) == ("ready", "stdio", None)
    assert {t["name"] for t in time_["tools"]} == {"get_current_time", "convert_time"}
    assert all(t["description"] for t in time_["tools"])
    assert time_["tokens"] > 50
    # The cost grows with the tools: 500 definitions cost about five times 100 of the same shape.
    assert len(rows["five-hundred"]["tools"]) == 500
    ratio = rows["five-hundred"]["tokens"] / rows["hundred"]["tokens"]
    assert 4.5 < ratio < 5.5, ratio
    assert rows["five-hundred"]["tokens"] > 10_000
    # Turned-off tools are listed but cost nothing: half of 4 costs about what 2 do.
    half = rows["half"]
    assert [t["enabled"] for t in half["tools"]] == [False, False, True, True]
    assert 0 < half["tokens"] < rows["hundred"]["tokens"] / 25
    mute = rows["mute"]
    assert (mute["status"], mute["error"]) == ("failed", "did not answer initialize within 3 s")
    assert rows["junk"]["status"] == "failed" and "not JSON-RPC" in rows["junk"]["error"]
    assert (rows["off"]["status"], rows["off"]["enabled"], rows["off"]["tools"]) == ("stopped", False, [])
    on = [s["tokens"] for s in out["servers"] if s["enabled"] and s["status"] == "ready"]
    assert out["tokens"] == sum(on)
    assert "Traceback" not in r.stderr

    text = _cli("list", "--model", str(model_path), "--timeout", "3")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert f"time  [stdio]  ready, 2 of 2 tools on, {time_['tokens']:,} tokens" in lines
    assert "mute  [stdio]  failed: did not answer initialize within 3 s" in lines
    assert "off  [stdio]  turned off" in lines
    assert any(line.strip().startswith("- tool_000") for line in lines)  # a turned-off tool is marked
    assert lines[-1] == f"tool definitions of the servers on: {out['tokens']:,} prompt tokens"


def test_add_remove_and_a_broken_file(isolated_dirs):
    r = _cli("add", "time", "--env", "TZ=UTC", "--", program("mcp-server-time"), "--local-timezone", "UTC")
    assert r.returncode == 0, r.stderr
    r = _cli("add", "web", "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization=Bearer t",
             "--trusted")
    assert r.returncode == 0, r.stderr
    cfg = load_config()
    time_, web = cfg.servers
    assert (time_.command, time_.args, time_.env) == (program("mcp-server-time"), ("--local-timezone", "UTC"),
                                                      (("TZ", "UTC"),))
    assert (web.url, web.headers, web.trusted) == ("http://127.0.0.1:9/mcp", (("Authorization", "Bearer t"),),
                                                   True)
    for args, fault in [(("add", "x"), "give the server's --url, or its command after --"),
                        (("add", "x", "--url", "http://a", "--", "cmd"), "not both"),
                        (("add", "x", "--env", "NOEQUALS", "--", "cmd"), "give it as KEY=VALUE"),
                        (("add", "x", "--url", "ftp://a"), '"url" must start with http'),
                        (("remove", "nothing"), "no server 'nothing'")]:
        r = _cli(*args)
        assert r.returncode == 2 and fault in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert _cli("remove", "web").returncode == 0
    assert [s.name for s in load_config().servers] == ["time"]

    broken = config_path().read_text() + "}"
    config_path().write_text(broken)
    for args in (("list",), ("add", "y", "--", "cmd"), ("remove", "time")):
        r = _cli(*args)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip() == f"llamadesk: error: {config_path()}: is not valid JSON " \
                                   f"(Extra data: line {broken.count(chr(10)) + 1} column 1 " \
                                   f"(char {len(broken) - 1}))", r.stderr
    assert config_path().read_text() == broken


def test_import_from_claude_desktop_reads_theirs_and_keeps_ours(isolated_dirs):
    r = _cli("import")
    assert r.returncode == 2 and "no Claude Desktop or LM Studio MCP file found" in r.stderr
    claude = isolated_dirs / "xdg_config_home" / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    theirs = json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]},
                                        "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}})
    claude.write_text(theirs)
    _write({"time": {"command": program("mcp-server-time")}})
    r = _cli("import")
    assert r.returncode == 0, r.stderr
    assert f"imported 1 server(s) from Claude Desktop ({claude})" in r.stderr
    assert "kept LlamaDesk's own time" in r.stderr
    cfg = load_config()
    assert [s.name for s in cfg.servers] == ["time", "fetch"]
    assert cfg.get("time").command == program("mcp-server-time")
    assert cfg.get("fetch").args == ("mcp-server-fetch",)
    assert claude.read_text() == theirs


def test_list_without_a_usable_model_still_lists_and_says_why_tokens_are_missing(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model")
    _write({"time": {"command": program("mcp-server-time")}})
    r = _cli("list", "--json", "--model", str(bad))
    assert r.returncode == 0, r.stderr
    said = f"llamadesk: token costs not counted: {bad}: not a GGUF file (wrong magic bytes)"
    assert r.stderr.strip() == said
    (row,) = json.loads(r.stdout)["servers"]
    assert row["status"] == "ready" and row["tokens"] is None and len(row["tools"]) == 2
    config_path().unlink()
    r = _cli("list")
    assert r.returncode == 0 and r.stdout.startswith(f"no MCP servers in {config_path()}")


def test_list_leaves_no_server_process_behind(tmp_path):
    from tests.mcp.conftest import gone

    pid_file = tmp_path / "child.pid"
    _write({"parent": {**_hostile("parent"), "env": {"CHILD_PID_FILE": str(pid_file)}}})
    r = _cli("list", "--json", "--model", str(tmp_path / "none.gguf"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["servers"][0]["status"] == "ready"
    assert gone(int(pid_file.read_text()))  # the server's own child, after the command has exited
