"""The MCP servers of one app run: started when first needed, called, and all stopped at the end.

Everything MCP runs on the hub's own asyncio loop, on a daemon thread: the SDK is async,
and neither the GUI thread nor a turn's worker may wait on a server. Callers get plain
results and concurrent futures. A server that will not start, crashes, hangs or talks
garbage becomes "failed" with one line and takes nothing else down; a call that fails
resolves to an error result instead of raising, so a turn always goes on. Stopping is
the SDK's (stdin closed, then the process group killed), with the group's leftovers
killed after it and a last sweep in close(), so no server outlives the app.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import IO

from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from app.mcp import processes
from app.mcp.config import McpConfig, ServerConfig
from app.mcp.connection import CONNECTION_CLOSED, describe, leaf, list_all_tools, one_line, open_session
from app.mcp.results import CallResult, failed, from_sdk

__all__ = ["CallResult", "McpHub", "McpTool", "ServerState"]

# The SDK logs a server's garbage with a traceback; with no handler of the app's own on the
# way, Python's last resort would print it on the user's terminal. The hub says it in one line.
for _name in ("mcp", "client"):
    logging.getLogger(_name).addHandler(logging.NullHandler())

STOP_WAIT_S = 10.0  # the SDK's own stop is bounded at about 6 s; then the hub kills what is left
_WATCH_S = 0.5  # how often a ready stdio server's process is looked at


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: dict

    def definition(self, function_name: str | None = None) -> dict:
        return {"type": "function", "function": {
            "name": function_name or self.name, "description": self.description,
            "parameters": self.input_schema or {"type": "object", "properties": {}}}}


@dataclass(frozen=True)
class ServerState:
    name: str
    status: str  # "stopped" | "starting" | "ready" | "failed"
    error: str | None = None  # one line when failed
    tools: tuple[McpTool, ...] = ()  # every tool the server lists (the disabled ones too)


class _Server:
    """One start of one server; a restart or a changed config makes a new one."""

    def __init__(self, cfg: ServerConfig):
        self.cfg = cfg
        self.state = ServerState(cfg.name, "stopped")
        self.session: ClientSession | None = None
        self.task: asyncio.Task | None = None
        self.settled = asyncio.Event()  # ready, failed or stopped after a start
        self.stop = asyncio.Event()
        self.done = asyncio.Event()  # the runner has ended and its process is gone
        self.fault: str | None = None  # set by whatever found it broken; the runner ends on it
        self.pid: int | None = None
        self.errlog: IO[str] | None = None

    def why(self, line: str) -> str:
        """A failure with the server's own last stderr line when it left one."""
        said = processes.last_line(self.errlog)
        return one_line(f"{line}: {said}" if said and said not in line else line)


class McpHub:
    def __init__(self, config: McpConfig, max_result_chars: int = 16_000):
        self.max_result_chars = max_result_chars
        self._config = config
        self._servers: dict[str, _Server] = {}
        self._retiring: set[_Server] = set()
        self._pids: set[int] = set()
        self._calls: set[asyncio.Task] = set()
        self._spawning: asyncio.Lock | None = None  # made on the loop
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="llamadesk-mcp", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # ---- the API, from any thread but the hub's ----

    def ensure(self, names: Iterable[str], timeout: float = 30.0) -> dict[str, ServerState]:
        if threading.current_thread() is self._thread:
            raise RuntimeError("McpHub.ensure waits on the hub's loop: call it from another thread")
        names = list(dict.fromkeys(names))
        if self._closed:
            return {n: ServerState(n, "failed", "the MCP hub is closed") for n in names}
        fut = asyncio.run_coroutine_threadsafe(self._ensure_all(names, timeout), self._loop)
        try:
            return fut.result(timeout + STOP_WAIT_S)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            return {n: self._state_of(n) for n in names}

    def states(self) -> dict[str, ServerState]:
        with self._lock:
            return {s.name: self._state_of(s.name) for s in self._config.servers}

    def call(self, server: str, tool: str, arguments: dict,
             timeout: float | None = None) -> concurrent.futures.Future[CallResult]:
        if self._closed:
            done: concurrent.futures.Future[CallResult] = concurrent.futures.Future()
            done.set_result(failed("the MCP hub is closed"))
            return done
        return asyncio.run_coroutine_threadsafe(self._tracked(self._call(server, tool, arguments, timeout)),
                                                self._loop)

    def restart(self, name: str, timeout: float = 30.0) -> ServerState:
        """Start a failed (or running) server afresh: the Tools page's Retry."""
        if not self._closed:
            asyncio.run_coroutine_threadsafe(self._retire(name), self._loop).result(STOP_WAIT_S + 5)
        return self.ensure([name], timeout)[name]

    def set_config(self, config: McpConfig) -> None:
        """Servers removed or changed are stopped (in the background); the rest keep running."""
        with self._lock:
            old, self._config = self._config, config
        if self._closed:
            return
        for s in old.servers:
            if config.get(s.name) != s:
                asyncio.run_coroutine_threadsafe(self._retire(s.name), self._loop)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop).result(STOP_WAIT_S + 5)
        for pid in list(self._pids):  # the last sweep: whatever a wedged stop left behind
            processes.kill_group(pid)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    # ---- on the hub's loop ----

    def _state_of(self, name: str) -> ServerState:
        srv = self._servers.get(name)
        if srv is not None:
            return srv.state
        cfg = self._config.get(name)
        if cfg is None:
            return ServerState(name, "failed", "no server of that name in mcp.json")
        return ServerState(name, "stopped")

    async def _ensure_all(self, names: list[str], timeout: float) -> dict[str, ServerState]:
        states = await asyncio.gather(*(self._ensure(n, timeout) for n in names))
        return dict(zip(names, states, strict=True))

    async def _ensure(self, name: str, timeout: float) -> ServerState:
        cfg = self._config.get(name)
        if cfg is None or not cfg.enabled:
            return self._state_of(name)
        srv = self._servers.get(name)
        if srv is None:
            srv = self._servers[name] = _Server(cfg)
            srv.state = replace(srv.state, status="starting")
            srv.task = asyncio.create_task(self._run(srv, timeout))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(srv.settled.wait()), timeout + 1)
        return srv.state

    async def _run(self, srv: _Server, timeout: float) -> None:
        name = srv.cfg.name
        if srv.cfg.transport == "stdio":
            srv.errlog = processes.stderr_file()

        async def on_fault(exc: Exception) -> None:
            srv.fault = srv.fault or describe(exc)
            srv.stop.set()
            if srv.state.status == "starting" and srv.task is not None:
                srv.task.cancel()  # said now, not when the start times out

        try:
            async with contextlib.AsyncExitStack() as stack:
                phase = "the connection"
                async with asyncio.timeout(timeout):
                    self._spawning = self._spawning or asyncio.Lock()
                    session, srv.pid = await open_session(srv.cfg, stack, srv.errlog, on_fault,
                                                          self._spawning)
                    if srv.pid is not None:
                        self._pids.add(srv.pid)
                    phase = "initialize"
                    await session.initialize()
                    phase = "tools/list"
                    listed = await list_all_tools(session)
                tools = tuple(McpTool(name, t.name, t.description or "", dict(t.input_schema))
                              for t in listed)
                srv.session = session
                srv.state = ServerState(name, "ready", tools=tools)
                srv.settled.set()
                while not srv.stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(srv.stop.wait(), _WATCH_S)
                    if srv.pid is not None and not processes.alive(srv.pid) and srv.fault is None:
                        srv.fault = "the server exited"
                        srv.stop.set()
                srv.session = None
        except asyncio.CancelledError:
            srv.fault = srv.fault or "stopped while starting"
        except Exception as e:  # noqa: BLE001 - any failure of a server is its own, said in one line
            if isinstance(leaf(e), TimeoutError) and srv.state.status == "starting":
                srv.fault = srv.fault or f"did not answer {phase} within {timeout:g} s"
            srv.fault = srv.fault or describe(e)
        finally:
            srv.session = None
            if srv.pid is not None:
                processes.kill_group(srv.pid)  # children a crashed leader left behind
                for _ in range(50):  # so that a stop, and close(), return with them gone
                    if not processes.group_alive(srv.pid):
                        break
                    await asyncio.sleep(0.02)
                self._pids.discard(srv.pid)
            if srv.fault and not (srv.stop.is_set() and srv.fault == "stopped while starting"):
                srv.state = ServerState(name, "failed", srv.why(srv.fault), srv.state.tools)
            else:
                srv.state = ServerState(name, "stopped", tools=srv.state.tools)
            srv.settled.set()
            srv.done.set()
            if srv.errlog is not None:
                srv.errlog.close()

    async def _tracked(self, call) -> CallResult:
        """A call close() can end: it resolves as failed, never left pending on a stopped loop."""
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            return await call
        except asyncio.CancelledError:
            if self._closed:
                return failed("stopped: the MCP servers were closed")
            raise
        finally:
            self._calls.discard(task)

    async def _call(self, server: str, tool: str, arguments: dict, timeout: float | None) -> CallResult:
        cfg = self._config.get(server)
        if cfg is None:
            return failed(f"{server}: no server of that name in mcp.json")
        if not cfg.enabled:
            return failed(f"{server}: the server is turned off")
        if tool in cfg.disabled_tools:
            return failed(f"{server}: the tool {tool} is turned off")
        state = await self._ensure(server, min(30.0, cfg.timeout_s))
        srv = self._servers.get(server)
        if state.status != "ready" or srv is None or srv.session is None:
            return failed(f"{server}: {state.error or 'the server is not running'}")
        limit = cfg.timeout_s if timeout is None else timeout
        try:
            async with asyncio.timeout(limit):
                result = await srv.session.call_tool(tool, arguments)
        except TimeoutError:
            return failed(f"{server}: {tool} did not answer within {limit:g} s")
        except MCPError as e:
            if e.code != CONNECTION_CLOSED:
                return failed(f"{server}: {tool}: {describe(e)}")
            srv.fault = srv.fault or "the server closed the connection"
            srv.stop.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(srv.done.wait(), STOP_WAIT_S)
            return failed(f"{server}: {srv.state.error or srv.fault}")
        except Exception as e:  # noqa: BLE001 - a result that is not MCP, a dropped connection: the call's
            return failed(f"{server}: {tool}: {describe(e)}")
        return from_sdk(result, self.max_result_chars)

    async def _retire(self, name: str) -> None:
        srv = self._servers.pop(name, None)
        if srv is not None:
            self._retiring.add(srv)
            await self._stop(srv)
            self._retiring.discard(srv)

    async def _stop(self, srv: _Server) -> None:
        srv.stop.set()
        if srv.task is None:
            return
        if srv.state.status == "starting":  # a start may be waiting on a silent server
            srv.task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(srv.task), STOP_WAIT_S)

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(s) for s in [*self._servers.values(), *self._retiring]))
        calls = list(self._calls)
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
