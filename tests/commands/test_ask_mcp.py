"""`llamadesk ask --mcp`: the bundled model held to a call reaches the real mcp-server-time (stdio), as a
subprocess with its own mcp.json; allowed by --allow-tools, denied with no terminal to ask on, and asked
on a real terminal (a pty) where "a" runs it and keeps the tool always allowed."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from app.chat.mcp_calls import DENIED
from app.history.store import Store
from tests.commands.test_cli_history import ROOT, one_line_error

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


@pytest.fixture
def time_server(isolated_dirs):
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "llamadesk" / "mcp.json"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(json.dumps({"mcpServers": {"time": {"command": str(TIME_SERVER), "args": []}}}))
    return cfg


def ask(model_path, *flags: str, **kw) -> subprocess.CompletedProcess:
    """The question in its own session: no controlling terminal unless `preexec_fn` gives one."""
    cmd = [sys.executable, "-m", "app", "ask", "What time is it in Tokyo?", "--mcp", "time", "--json",
           "--model", str(model_path), "--ctx", "2048", "--temperature", "0", "--max-tokens", "48", *flags]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, start_new_session=True,
                          stdin=subprocess.DEVNULL, **kw)


def _take_terminal(fd: int) -> None:
    """In the child, before exec: the pty becomes its controlling terminal (/dev/tty)."""
    tty = os.open(os.ttyname(fd), os.O_RDWR)
    fcntl.ioctl(tty, termios.TIOCSCTTY, 0)
    os.close(tty)


def _server_answered(call: dict) -> dict:
    """The time server's own answer: a JSON object for the timezone the model asked about."""
    got = json.loads(call["result"])
    assert set(got) >= {"timezone", "datetime", "is_dst"}, call["result"]
    assert got["timezone"] == call["arguments"]["timezone"]
    return got


def test_an_allowed_call_reaches_the_real_server_and_its_answer_goes_back(model_path, time_server):
    r = ask(model_path, "--allow-tools", "time", "--tool-choice", "required")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    first = out["tool_calls"][0]
    assert first["server"] == "time" and first["name"] in ("get_current_time", "convert_time")
    if first["name"] == "get_current_time":
        _server_answered(first)
    assert out["waiting_for"] == [] and len(out["rounds"]) >= 2  # the model was asked again
    with Store.open() as s:
        conv = s.get_conversation(out["conversation"])
    tool = next(m for m in conv.messages if m.role == "tool")
    assert (tool.tool_server, tool.tool_name, tool.content) == ("time", first["name"], first["result"])
    assert conv.tools["mcp"] == ["time"]
    assert "Traceback" not in r.stderr


def test_with_no_terminal_a_call_not_allowed_is_denied(model_path, time_server):
    r = ask(model_path, "--tool-choice", "get_current_time", "--max-tokens", "32")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tool_calls"][0]["server"] == "time" and out["tool_calls"][0]["result"] == DENIED
    assert "no terminal to ask on: denied" in r.stderr


def test_on_a_terminal_a_runs_the_call_and_keeps_the_tool_allowed(model_path, time_server):
    main, side = pty.openpty()
    os.write(main, b"a\nn\nn\n")  # "always" for the first ask; a second ask would be denied
    try:
        r = ask(model_path, "--tool-choice", "get_current_time",
                preexec_fn=lambda: _take_terminal(side))
    finally:
        os.close(side)
        os.close(main)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("llamadesk: allow time/get_current_time {") == 1, r.stderr  # asked once
    calls = json.loads(r.stdout)["tool_calls"]
    assert all(c["result"] != DENIED for c in calls)
    _server_answered(calls[0])
    kept = json.loads((time_server.parent / "mcp-approvals.json").read_text())
    assert kept["always"] == {"time": ["get_current_time"]}


def test_an_unknown_server_is_one_line(model_path, time_server):
    cmd = [sys.executable, "-m", "app", "ask", "hi", "--mcp", "clock", "--model", str(model_path)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    line = one_line_error(r)
    assert "--mcp clock: there is no such server" in line and "(time)" in line


def test_the_printed_turn_names_the_server(model_path, time_server):
    cmd = [sys.executable, "-m", "app", "ask", "What time is it in Tokyo?", "--mcp", "time", "--allow-tools",
           "time/get_current_time", "--tool-choice", "get_current_time", "--no-save",
           "--model", str(model_path), "--ctx", "2048", "--temperature", "0", "--max-tokens", "48"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, start_new_session=True,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "→ tool call: get_current_time (MCP server time)\n" in r.stdout
    assert '← get_current_time returned:\n    {\n      "timezone": ' in r.stdout  # the server's JSON
