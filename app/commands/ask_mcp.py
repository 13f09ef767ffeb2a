"""`ask --mcp NAME`: a question that may call MCP servers' tools, the user asked on the terminal.

The servers are the ones in LlamaDesk's mcp.json (`llamadesk mcp list`), started
for this one question and stopped with it, processes and all. A server that does
not start is one line on stderr and the question goes on without its tools, as
in the window. Each call asks on the terminal itself (/dev/tty, so a piped
stdin or stdout does not answer for the user): y runs it once, a always (kept,
as the window's "Always allow"), anything else denies it. With no terminal to
ask, a call is denied unless the server is trusted, the tool always allowed, or
named by `--allow-tools` ("server" or "server/tool"), which is how a script
lets calls run. The policy is app.chat.mcp_calls, the window's.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import CancelledError
from typing import TYPE_CHECKING

from app.chat.mcp_calls import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    BAD_ARGUMENTS,
    CANCELLED,
    DENIED,
    DENY,
    allowed_without_asking,
    answer,
    arguments,
    describe,
    timeout_of,
)
from app.chat.tool_set import McpFunction, ToolSet
from app.commands.common import note
from app.engine.message import ToolCall

if TYPE_CHECKING:
    from app.mcp.approvals import Approvals
    from app.mcp.config import McpConfig
    from app.mcp.hub import McpHub

TTY = "/dev/tty"


def add_args(group) -> None:
    group.add_argument("--mcp", action="append", default=None, metavar="NAME",
                       help="let the model call the tools of MCP server NAME from mcp.json (see `llamadesk "
                            "mcp list`); repeat it or give NAME,NAME for more. Each call asks on the "
                            "terminal")
    group.add_argument("--allow-tools", action="append", default=None, metavar="NAME",
                       help="with --mcp: calls of server NAME, or of tool NAME given as server/tool, run "
                            "without asking (for scripts; with no terminal, other calls are denied)")


def names(values: list[str] | None) -> tuple[str, ...]:
    """Repeated flags and comma lists as one list of names, each once."""
    out = [n.strip() for v in values or () for n in v.split(",")]
    if any(not n for n in out):
        raise ValueError("--mcp/--allow-tools: a server name is empty")
    return tuple(dict.fromkeys(out))


class McpSession:
    """The servers of one `ask`: started when its tools name any, closed when the command ends."""

    def __init__(self, args: argparse.Namespace):
        self.given = names(getattr(args, "mcp", None))
        self.allowed = names(getattr(args, "allow_tools", None))
        if self.allowed and not self.given and getattr(args, "continue_id", None) is None:
            raise ValueError("--allow-tools names MCP tools to run without asking: give --mcp NAME too")
        self.hub: McpHub | None = None
        self.config: McpConfig | None = None
        self.approvals: Approvals | None = None

    def __enter__(self) -> McpSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
            self.hub = None

    def resolve(self, tools: ToolSet) -> ToolSet:
        """Start the servers `tools` names and give it their tools; a server that is missing,
        off or fails is said and left out."""
        if not tools.mcp:
            return tools
        from app.mcp.approvals import Approvals
        from app.mcp.config import config_path, load_config
        from app.mcp.hub import McpHub

        self.config = config = load_config()
        self.approvals = Approvals.load()
        start = []
        for name in tools.mcp:
            cfg = config.get(name)
            if cfg is None:
                known = ", ".join(s.name for s in config.servers) or "none configured"
                if name in self.given:
                    raise ValueError(f"--mcp {name}: there is no such server in {config_path()} ({known})")
                note(f"MCP server {name} is no longer in {config_path()}: the question goes on without it")
            elif not cfg.enabled:
                note(f"MCP server {name} is turned off in {config_path()}: the question goes on without it")
            else:
                start.append(name)
        self.hub = McpHub(config)
        states = self.hub.ensure(start)
        for name in start:
            state = states.get(name)
            if state is None or state.status != "ready":
                why = state.error if state is not None and state.error else "it did not start"
                note(f"MCP server {name}: {why}; the question goes on without its tools")
        tools = tools.with_mcp(states, config)
        for line in tools.left_out:
            note(f"MCP tool {line} (left out)")
        return tools

    def answer(self, call: ToolCall, fn: McpFunction) -> str:
        """Ask (unless allowed), run the call on its server and say what the model reads."""
        assert self.hub is not None and self.config is not None
        args = arguments(call)
        if args is None:
            return BAD_ARGUMENTS
        if not allowed_without_asking(self.config, self.approvals, fn.server, fn.tool, self.allowed):
            decision = ask_on_terminal(describe(call, fn))
            if decision == DENY:
                note(f"{fn.server}/{fn.tool}: denied")
                return DENIED
            if decision == ALLOW_ALWAYS and self.approvals is not None:
                self.approvals.allow_always(fn.server, fn.tool)
        future = self.hub.call(fn.server, fn.tool, args, timeout=timeout_of(self.config, fn.server))
        try:
            while True:
                try:
                    return answer(future.result(timeout=0.1))
                except TimeoutError:
                    continue
                except CancelledError:
                    return CANCELLED
        except KeyboardInterrupt:
            future.cancel()  # Ctrl+C: the call stops with the command
            raise


def ask_on_terminal(line: str) -> str:
    """y: once, a: always, anything else: deny; no terminal to ask on: deny, said."""
    try:
        tty = open(TTY, encoding="utf-8", errors="replace")
    except OSError:
        note(f"allow {line}? no terminal to ask on: denied (--allow-tools lets a script allow it)")
        return DENY
    with tty:
        sys.stderr.write(f"llamadesk: allow {line}? [y]es once, [a]lways, [N]o: ")
        sys.stderr.flush()
        got = tty.readline().strip().lower()
    return ALLOW_ONCE if got in ("y", "yes") else ALLOW_ALWAYS if got in ("a", "always") else DENY


def with_servers(calls: list[dict], tools: ToolSet) -> list[dict]:
    """`--json`'s tool_calls, each with the MCP server it went to (null: a built-in or declared tool)."""
    for c in calls:
        fn = tools.mcp_target(c["name"])
        c["server"] = fn.server if fn is not None else None
    return calls


def server_of(tools: ToolSet, call: ToolCall) -> str | None:
    fn = tools.mcp_target(call.name)
    return fn.server if fn is not None else None
