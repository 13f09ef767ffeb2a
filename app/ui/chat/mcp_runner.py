"""The window's one MCP hub, and its blocking calls kept off the GUI thread.

app.mcp.McpHub runs the servers on its own asyncio thread but its `ensure`
blocks until each server answers or fails, and a call is a future: neither may
be waited on by the GUI thread, or a slow server would freeze the window. This
starts `ensure` on a plain daemon thread and hands each result back through a
signal, which Qt queues to the GUI thread (this object lives there). The hub is
built from mcp.json when the window opens (a broken file is one line, and no
servers until it is mended), shared with Settings > Tools through `.hub`, and
closed with the window, its server processes with it. The hub (and the SDK, half
a second to import) is made the first time something needs it, so a window
whose conversations call no MCP server never pays for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future

from PySide6.QtCore import QObject, Signal

from app.errors import LlamaDeskError

log = logging.getLogger("llamadesk.ui")


class McpRunner(QObject):
    ensured = Signal(object, object)  # the caller's token, {name: ServerState}
    called = Signal(object, object)  # the caller's token, CallResult (cancelled: None)
    config_changed = Signal(object)  # McpConfig, after set_config (the Tools page saved a change)

    def __init__(self, parent=None, config=None):
        super().__init__(parent)
        from app.mcp.config import McpConfig, load_config

        self.problem: str | None = None  # why mcp.json could not be used, one line
        if config is None:
            try:
                config = load_config()
            except LlamaDeskError as e:
                self.problem, config = str(e), McpConfig()
        self.config = config
        self._hub = None
        self._calls: dict[object, Future] = {}  # token -> the hub's future, while it runs
        self._closed = False

    @property
    def approvals(self):
        """The "Always allow" decisions as the file has them now: a revoke in Settings, or an
        `ask` in a terminal meanwhile, counts at the next call."""
        from app.mcp.approvals import Approvals

        return Approvals.load()

    @property
    def hub(self):
        """The McpHub, made on first use (after close: a closed one, which refuses calls)."""
        if self._hub is None:
            from app.mcp.hub import McpHub

            self._hub = McpHub(self.config)
            if self._closed:
                self._hub.close()
        return self._hub

    def set_config(self, config) -> None:
        """The config as Settings > Tools saved it: servers changed or removed stop."""
        self.config = config
        self.problem = None
        if self._hub is not None:
            self._hub.set_config(config)
        self.config_changed.emit(config)

    def states(self) -> dict:
        """Each configured server's state (all "stopped" before anything started one)."""
        if self._hub is None:
            from app.mcp.hub import ServerState

            return {s.name: ServerState(s.name, "stopped") for s in self.config.servers}
        return self._hub.states()

    def ensure(self, names: Iterable[str], token: object) -> None:
        """Start the servers on a thread of their own; `ensured` says how each ended."""
        names = list(names)

        def work() -> None:
            states = self.hub.ensure(names)
            if not self._closed:
                self.ensured.emit(token, states)

        threading.Thread(target=work, name="mcp-ensure", daemon=True).start()

    def call(self, server: str, tool: str, arguments: dict, timeout: float, token: object) -> None:
        """Run a call; `called` gives its result (None: it was cancelled)."""
        future = self.hub.call(server, tool, arguments, timeout=timeout)
        self._calls[token] = future

        def done(f: Future) -> None:
            if self._closed or self._calls.get(token) is not f:
                return
            result = None if f.cancelled() else f.result()
            self.called.emit(token, result)

        future.add_done_callback(done)

    def cancel(self, token: object) -> bool:
        """Cancel a running call (Esc); its `called` comes with None."""
        future = self._calls.get(token)
        return future is not None and future.cancel()

    def finished(self, token: object) -> None:
        self._calls.pop(token, None)

    def close(self) -> None:
        """Stop every server and its processes (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for future in list(self._calls.values()):
            future.cancel()
        self._calls.clear()
        if self._hub is not None:
            self._hub.close()

