"""Ctrl+C on a slow server, as a user presses it: `llamadesk ask --endpoint` and `llamadesk compare`
stop at once even while the server sends nothing, keep what was shown marked stopped, and exit 130.

Each test runs the real command in a child process against a server on a real socket that drips
one token a second (or falls silent after the first), and sends SIGINT once the first token is
on the child's stdout or the server has the request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.remote.servers import FaultServer, answer, drip_server

WORDS = [f"word{i} " for i in range(30)]


@pytest.fixture
def servers():
    made: list[FaultServer] = []

    def make(srv: FaultServer) -> FaultServer:
        made.append(srv)
        return srv
    yield make
    for s in made:
        s.stop()


def _as_at_a_terminal() -> None:
    """Ctrl+C as a terminal delivers it: a test run started in the background passes SIGINT on
    ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ}, preexec_fn=_as_at_a_terminal)


def _wait_for(what, p: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end, "the child never got that far"
        time.sleep(0.05)


def _first_bytes(p: subprocess.Popen, timeout: float = 120) -> bytes:
    """Read the child's stdout until the first token's text is there."""
    os.set_blocking(p.stdout.fileno(), False)
    got = b""
    end = time.monotonic() + timeout
    while b"word0" not in got:
        chunk = p.stdout.read()
        got += chunk or b""
        assert p.poll() is None or chunk, p.communicate()
        assert time.monotonic() < end, "no first token"
        time.sleep(0.05)
    os.set_blocking(p.stdout.fileno(), True)
    return got


def _interrupt(p: subprocess.Popen) -> tuple[float, str, str]:
    """SIGINT now; (seconds until the child exited, its stdout, its stderr)."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return time.monotonic() - t0, out.decode(), err.decode()


def _stored_messages() -> list[dict]:
    """The one conversation's messages, as `llamadesk export` reads them from the store."""
    listed = subprocess.run([sys.executable, "-m", "app", "list", "--json"], capture_output=True, text=True,
                            timeout=60)
    convs = json.loads(listed.stdout)
    assert len(convs) == 1, convs
    r = subprocess.run([sys.executable, "-m", "app", "export", str(convs[0]["id"]), "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["conversation"]["messages"]


def _chat_server(post):
    """A server of one model "m" that answers each POST with `post(handler)`."""
    models = '{"object": "list", "data": [{"id": "m", "object": "model"}]}'

    def behave(h):
        if h.path.endswith("/models"):
            return answer(h, 200, models)
        if h.command != "POST":
            return answer(h, 404, "{}")
        post(h)
    return behave


@pytest.mark.parametrize("every_s", [1.0, 60.0], ids=["dripping", "silent after the first token"])
def test_ctrl_c_stops_a_slow_remote_reply_keeps_it_stopped_and_exits_130(servers, every_s):
    srv = servers(drip_server(WORDS, every_s))
    p = _start("ask", "--endpoint", srv.base + "/v1", "Tell me a story.")
    shown = _first_bytes(p)
    took, out, err = _interrupt(p)
    assert p.returncode == 130, err
    # The stopped read used to wait for the server's next byte, however long that took.
    assert took < 5, f"{took:.1f} s from Ctrl+C to exit (it took 13 s before)"
    assert "Traceback" not in err and "stopped" in err and "saved as conversation" in err
    kept = _stored_messages()[-1]
    assert kept["role"] == "assistant" and kept["content"].strip() == (shown + out.encode()).decode().strip()
    assert kept["stats"]["stop_reason"] == "cancelled"  # shown as "stopped", not as finished
    assert kept["state"] != "generating" and len(kept["content"].split()) < len(WORDS)


def test_ctrl_c_with_no_save_and_json_still_exits_130_with_the_reply_so_far(servers):
    srv = servers(drip_server(WORDS, 60.0))
    p = _start("ask", "--no-save", "--no-stream", "--endpoint", srv.base + "/v1", "--json", "hi")
    _wait_for(lambda: any(m == "POST" for m, _ in srv.requests), p)
    time.sleep(0.5)  # the first token is sent at once; the next in a minute
    took, out, err = _interrupt(p)
    assert p.returncode == 130 and took < 5, (took, err)
    doc = json.loads(out)
    assert doc["text"] == "word0 " and doc["stats"]["stop_reason"] == "cancelled"
    assert doc["conversation"] is None


def test_ctrl_c_while_waiting_out_a_servers_429_stops_at_once(servers):
    busy = json.dumps({"error": {"message": "slow down"}})
    srv = servers(FaultServer(_chat_server(lambda h: answer(h, 429, busy, headers={"Retry-After": "50"}))))
    p = _start("ask", "--endpoint", srv.base + "/v1", "hi")
    _wait_for(lambda: any(m == "POST" for m, _ in srv.requests), p)
    time.sleep(0.5)
    took, _, err = _interrupt(p)
    assert p.returncode == 130 and took < 5, (took, err)
    assert "retrying in 50 s" in err and "Traceback" not in err
    listed = subprocess.run([sys.executable, "-m", "app", "list", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert json.loads(listed.stdout) == [], "a reply stopped before any text leaves nothing behind"


def test_ctrl_c_during_compare_on_a_slow_server_exits_130_with_the_row_stopped(servers):
    srv = servers(drip_server(WORDS, 60.0))
    url = srv.base + "/v1"
    p = _start("compare", "Tell me a story.", "--endpoint", url, "--endpoint", url, "--repeat", "1",
               "--no-warmup", "--json")
    _wait_for(lambda: any(m == "POST" for m, _ in srv.requests), p)
    time.sleep(0.5)
    took, out, err = _interrupt(p)
    assert p.returncode == 130, err
    assert took < 5, f"{took:.1f} s from Ctrl+C to exit"
    rows = json.loads(out)["rows"]
    assert [r["runs"] for r in rows] == [0, 0]
    assert rows[0]["error"] == "cancelled" and "cancelled before it ran" in rows[1]["error"]
    assert "interrupted: the table holds what finished" in err and "Traceback" not in err


def test_ctrl_c_on_a_reply_calling_a_tool_ends_the_turn_there(servers):
    """The call arrived, the reply has not finished: the tool is not run, the model not asked again."""
    call = {"index": 0, "id": "c1", "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}}
    def post(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
        h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        h.wfile.flush()
        srv.release.wait(60)  # the finish never comes while the test runs
    srv = servers(FaultServer(_chat_server(post)))
    p = _start("ask", "--builtin-tools", "--endpoint", srv.base + "/v1", "what is 2+2?")
    _wait_for(lambda: any(m == "POST" for m, _ in srv.requests), p)
    time.sleep(0.5)
    took, _, err = _interrupt(p)
    assert p.returncode == 130 and took < 5, (took, err)
    assert [m for m, _ in srv.requests].count("POST") == 1, "the model was not asked again"
    messages = _stored_messages()
    assert [m["role"] for m in messages] == ["user", "assistant"], "no tool result was recorded"
    assert messages[-1]["stats"]["stop_reason"] == "cancelled"
    assert "returned" not in err
