"""Servers that crash, hang, talk garbage or list 500 tools: each ends in one line, quickly, and the
hub goes on serving the others; nothing they started outlives close()."""

from __future__ import annotations

import time

from app.mcp.config import ServerConfig
from tests.mcp.conftest import gone, hostile, program


def _one_line(text: str | None) -> str:
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


def test_a_server_that_dies_mid_call_is_one_line_and_leaves_no_child(make_hub, child_pid_file):
    hub = make_hub(hostile("crash", "crash", env=(("CHILD_PID_FILE", str(child_pid_file)),)),
                   ServerConfig("time", program("mcp-server-time")))
    assert hub.ensure(["crash", "time"])["crash"].status == "ready"
    t0 = time.monotonic()
    result = hub.call("crash", "work", {}).result(30)
    assert time.monotonic() - t0 < 10
    assert result.is_error
    assert "fell over in the middle of a call" in _one_line(result.text)  # its own last stderr line
    state = hub.states()["crash"]
    assert state.status == "failed" and "fell over" in _one_line(state.error)
    # The child it started before dying is killed with it (its process group), not orphaned.
    child = int(child_pid_file.read_text())
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(child)
    # The hub still serves the other server, and a failed one answers at once, in one line.
    assert not hub.call("time", "get_current_time", {"timezone": "UTC"}).result(30).is_error
    again = hub.call("crash", "work", {}).result(5)
    assert again.is_error and "fell over" in _one_line(again.text)


def test_a_call_never_answered_ends_at_its_timeout(make_hub):
    hub = make_hub(hostile("silent", "silent", timeout_s=60),
                   ServerConfig("time", program("mcp-server-time")))
    assert hub.ensure(["silent", "time"])["silent"].status == "ready"
    t0 = time.monotonic()
    result = hub.call("silent", "work", {}, timeout=0.5).result(10)
    took = time.monotonic() - t0
    assert result.is_error and "did not answer within 0.5 s" in _one_line(result.text)
    assert 0.4 < took < 3, took
    # The server's own timeout applies when the call names none.
    hub.set_config(hub._config.with_server(hostile("silent", "silent", timeout_s=0.3)))
    t0 = time.monotonic()
    result = hub.call("silent", "work", {}).result(10)
    assert "did not answer within 0.3 s" in result.text and time.monotonic() - t0 < 5
    assert not hub.call("time", "get_current_time", {"timezone": "UTC"}).result(30).is_error


def test_cancelling_a_call_cancels_it(make_hub):
    hub = make_hub(hostile("silent", "silent"))
    hub.ensure(["silent"])
    fut = hub.call("silent", "work", {})
    time.sleep(0.2)
    assert fut.cancel()
    assert fut.cancelled()
    # The server is still usable for the next call (it answers nothing, so that one times out).
    assert "did not answer within 0.2 s" in hub.call("silent", "work", {}, timeout=0.2).result(10).text
    assert hub.states()["silent"].status == "ready"


def test_a_server_silent_at_the_start_fails_at_the_start_timeout(make_hub):
    hub = make_hub(hostile("mute", "silent-start"), ServerConfig("time", program("mcp-server-time")))
    t0 = time.monotonic()
    states = hub.ensure(["mute", "time"], timeout=1.0)
    assert time.monotonic() - t0 < 8
    assert states["mute"].status == "failed"
    assert _one_line(states["mute"].error) == "did not answer initialize within 1 s"
    assert states["time"].status == "ready"
    # Not started again on every turn: the failure stands (until a restart), and calls say it.
    t0 = time.monotonic()
    assert hub.ensure(["mute"], timeout=1.0)["mute"].status == "failed"
    result = hub.call("mute", "work", {}).result(5)
    assert time.monotonic() - t0 < 1 and "did not answer initialize" in result.text


def test_a_server_writing_garbage_fails_in_one_line_at_once(make_hub):
    hub = make_hub(hostile("junk", "garbage"), ServerConfig("time", program("mcp-server-time")))
    t0 = time.monotonic()
    states = hub.ensure(["junk", "time"], timeout=20)
    assert time.monotonic() - t0 < 10  # said when it happens, not when the start times out
    assert states["junk"].status == "failed"
    assert "not JSON-RPC" in _one_line(states["junk"].error)
    assert "Server starting... this is not JSON" in states["junk"].error
    assert not hub.call("time", "get_current_time", {"timezone": "UTC"}).result(30).is_error


def test_a_server_with_500_tools_is_listed_whole(make_hub):
    hub = make_hub(hostile("many", "many", "500"))
    state = hub.ensure(["many"])["many"]
    assert state.status == "ready"
    assert len(state.tools) == 500 and state.tools[499].name == "tool_499"
    assert hub.call("many", "tool_321", {}).result(10).text == "tool_321"


def test_programs_that_cannot_start_are_one_line(make_hub, tmp_path):
    hub = make_hub(ServerConfig("nope", str(tmp_path / "no-such-program")),
                   ServerConfig("refused", url="http://127.0.0.1:9/mcp"))
    states = hub.ensure(["nope", "refused", "unknown"], timeout=10)
    assert states["nope"].status == "failed" and "no such program" in _one_line(states["nope"].error)
    assert states["refused"].status == "failed"
    _one_line(states["refused"].error)
    assert states["unknown"].status == "failed" and "no server of that name" in states["unknown"].error


def test_turned_off_servers_and_tools_are_not_run(make_hub):
    hub = make_hub(ServerConfig("off", program("mcp-server-time"), enabled=False),
                   ServerConfig("time", program("mcp-server-time"), disabled_tools=("convert_time",)))
    states = hub.ensure(["off", "time"])
    assert states["off"].status == "stopped" and states["time"].status == "ready"
    assert {t.name for t in states["time"].tools} == {"get_current_time", "convert_time"}  # listed all
    off = hub.call("time", "convert_time", {"source_timezone": "UTC", "time": "12:00",
                                            "target_timezone": "Asia/Tokyo"}).result(10)
    assert off.is_error and "turned off" in off.text
    assert hub.call("off", "get_current_time", {"timezone": "UTC"}).result(10).is_error
    assert hub.states()["off"].status == "stopped"


def test_restart_and_changed_config(make_hub, child_pid_file):
    hub = make_hub(hostile("crash", "crash", env=(("CHILD_PID_FILE", str(child_pid_file)),)),
                   ServerConfig("time", program("mcp-server-time")))
    hub.ensure(["crash", "time"])
    hub.call("crash", "work", {}).result(30)
    assert hub.states()["crash"].status == "failed"
    assert hub.restart("crash").status == "ready"
    # A removed server is stopped; a server added later starts when asked for.
    hub.set_config(hub._config.without("time").with_server(hostile("many", "many", "3")))
    assert "time" not in hub.states()
    assert hub.ensure(["many"])["many"].status == "ready"


def test_a_server_that_dies_while_idle_is_failed_and_close_ends_calls_in_flight(make_hub):
    import psutil

    hub = make_hub(ServerConfig("time", program("mcp-server-time")), hostile("silent", "silent"))
    hub.ensure(["time", "silent"])
    before = {p.pid for p in psutil.Process().children()}
    (leader,) = [p for p in psutil.Process().children() if "mcp-server-time" in " ".join(p.cmdline())]
    assert leader.pid in before
    leader.kill()
    deadline = time.monotonic() + 5
    while hub.states()["time"].status != "failed" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hub.states()["time"].status == "failed"
    assert "exited" in _one_line(hub.states()["time"].error) or "closed" in hub.states()["time"].error
    pending = hub.call("silent", "work", {})
    time.sleep(0.2)
    t0 = time.monotonic()
    hub.close()
    assert time.monotonic() - t0 < 10
    result = pending.result(1)  # resolved by close(), not left waiting on a stopped loop
    assert result.is_error and "\n" not in result.text


def test_close_takes_a_healthy_server_and_the_children_it_started(make_hub, child_pid_file):
    import psutil

    hub = make_hub(hostile("parent", "parent", env=(("CHILD_PID_FILE", str(child_pid_file)),)))
    assert hub.ensure(["parent"])["parent"].status == "ready"
    child = int(child_pid_file.read_text())
    parent = psutil.Process(child).ppid()
    assert not gone(child) and not gone(parent)
    hub.close()
    assert gone(parent) and gone(child)  # gone when close() returns, not a moment later


def test_a_server_without_tools_is_ready_with_none(make_hub):
    hub = make_hub(hostile("bare", "no-tools"))
    state = hub.ensure(["bare"])["bare"]
    assert (state.status, state.error, state.tools) == ("ready", None, ())
