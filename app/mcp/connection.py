"""One server's connection through the official SDK, and any failure of it said in one line.

The transports differ only in how the two message streams are opened (a child process's
pipes, a streamable-HTTP endpoint, an SSE endpoint); everything after that is the SDK's
ClientSession. Failures arrive as SDK errors, HTTP errors, pydantic errors and exception
groups from anyio's task groups; `describe` reduces each to the one line the Tools page
and the chat show.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import IO

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from app.mcp import processes
from app.mcp.config import ServerConfig

CLIENT_INFO = types.Implementation(name="llamadesk", version="1")
MAX_TOOL_PAGES = 100  # a server whose cursor never ends cannot hang the start
CONNECTION_CLOSED = types.CONNECTION_CLOSED
# The SDK's own bound on one streamed HTTP message is 1 MiB: a web page fetched whole is more.
# The result is cut to a share of the context afterwards; this only bounds the memory it takes.
# (The SSE transport keeps the SDK's bound: its client takes no other.)
MAX_MESSAGE_BYTES = 32 << 20


def one_line(text: str, limit: int = 240) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """What went wrong, for a person: no class paths, no traceback, one line."""
    exc = leaf(exc)
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            return f"wrote a line that is not JSON-RPC: {one_line(repr(errors[0].get('input', '')), 80)}"
        return f"sent a message that is not valid MCP ({one_line(str(errors[0].get('msg', exc)), 120)})"
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "the server closed the connection"
        return one_line(exc.message or f"error {exc.code}")
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"cannot start {exc.filename}: no such program"
    if isinstance(exc, OSError) and exc.strerror:
        return one_line(f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror}")
    text = str(exc) or type(exc).__name__
    if type(exc).__module__.startswith(("httpx", "mcp")):
        return one_line(text)
    return one_line(f"{type(exc).__name__}: {text}")


async def open_session(cfg: ServerConfig, stack: contextlib.AsyncExitStack, errlog: IO[str] | None,
                       on_fault: Callable[[Exception], Awaitable[None]],
                       spawning: asyncio.Lock) -> tuple[ClientSession, int | None]:
    """Enter the transport and the session on `stack`; the pid of a stdio server's process.

    `spawning` is held from before the spawn to after the pid is found, so two servers
    started at once can never be taken for each other (the SDK does not say which it started).
    """
    pid = None
    if cfg.transport == "stdio":
        params = StdioServerParameters(command=cfg.command or "", args=list(cfg.args),
                                       env=dict(cfg.env) or None)
        async with spawning:
            before = processes.children()
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))  # type: ignore[arg-type]
            pid = processes.spawned(before, cfg.command or "")
    elif cfg.transport == "sse":
        read, write = await stack.enter_async_context(sse_client(cfg.url or "", headers=dict(cfg.headers)))
    else:
        http = await stack.enter_async_context(create_mcp_http_client(headers=dict(cfg.headers)))
        read, write = await stack.enter_async_context(
            streamable_http_client(cfg.url or "", http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES))

    async def handler(message) -> None:
        if isinstance(message, Exception):
            await on_fault(message)

    session = await stack.enter_async_context(
        ClientSession(read, write, message_handler=handler, client_info=CLIENT_INFO))
    return session, pid


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of the server's tools; none from a server that offers only prompts or resources."""
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        try:
            page = await session.list_tools(params=params)
        except MCPError as e:
            if e.code == types.METHOD_NOT_FOUND and not tools:
                return []
            raise
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
