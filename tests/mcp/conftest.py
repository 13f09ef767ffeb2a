"""Real MCP servers for the hub's tests: the PyPI ones, the SDK's own over HTTP, and hostile scripts."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.mcp.config import McpConfig, ServerConfig
from app.mcp.hub import McpHub

SERVERS = Path(__file__).parent / "servers"
BIN = Path(sys.executable).parent


def program(name: str) -> str:
    """A console script installed beside this Python (the venv's bin), by absolute path."""
    path = BIN / name
    assert path.exists(), f"{name} is not installed in {BIN}"
    return str(path)


def hostile(name: str, mode: str, *args: str, **kw) -> ServerConfig:
    return ServerConfig(name, sys.executable, (str(SERVERS / "hostile.py"), mode, *args), **kw)


def descendants() -> list[psutil.Process]:
    """This process's living descendants (a zombie is dead, only not yet reaped)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def make_hub():
    """McpHub over the given servers; every hub is closed after the test, and the test fails
    if any process it started is left alive."""
    hubs: list[McpHub] = []
    before = {p.pid for p in descendants()}

    def make(*servers: ServerConfig, **kw) -> McpHub:
        hub = McpHub(McpConfig(tuple(servers)), **kw)
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        hub.close()
    left = [p for p in descendants() if p.pid not in before]
    assert not left, f"processes left after close(): {[p.cmdline() for p in left]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the test server exited with {proc.returncode}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {timeout:g} s")


def start_http_tools(transport: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVERS / "http_tools.py"), str(port), transport],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    path = "/sse" if transport == "sse" else "/mcp"
    return proc, f"http://127.0.0.1:{port}{path}"


@pytest.fixture(scope="module")
def http_tools_url():
    """The SDK's MCPServer over streamable HTTP (uvicorn on a free port, its own process)."""
    proc, url = start_http_tools("streamable-http")
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def sse_tools_url():
    proc, url = start_http_tools("sse")
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def child_pid_file(tmp_path) -> Path:
    return tmp_path / "child.pid"

