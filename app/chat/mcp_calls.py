"""An MCP tool call in a conversation: whether the user is asked, what the model is told, what is kept.

A call reaches a program the user installed, with arguments a model wrote, so
the user decides unless they already have: a server marked trusted in mcp.json,
a tool they said "Always allow" to (app.mcp.approvals), or, for a script, a name
given to `ask --allow-tools`. A call the user turned down, or stopped, still
gets an answer the model reads, in words that say what happened, so it neither
waits for a result nor takes the silence for one; the card shows the same.
The result goes into the conversation as a tool message naming its server
(MessageBody.tool_server), so the transcript, the exports and `list --json`
say where each answer came from. Shared by the window and `ask`, so both
follow one policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.chat.tool_set import McpFunction
from app.engine.message import MessageBody, ToolCall

# What the model is told of a call turned down or stopped: the words live with the card that shows them.
from app.rendering.tool_parts import CANCELLED as CANCELLED
from app.rendering.tool_parts import DENIED as DENIED

if TYPE_CHECKING:
    from app.mcp.approvals import Approvals
    from app.mcp.config import McpConfig
    from app.mcp.hub import CallResult

ALLOW_ONCE, ALLOW_ALWAYS, DENY = "once", "always", "deny"  # the user's answers


def allowed_without_asking(config: McpConfig, approvals: Approvals | None, server: str, tool: str,
                           allowed: Iterable[str] = ()) -> bool:
    """A trusted server, a tool always allowed, or a name in `allowed` ("server" for all its
    tools, "server/tool" for one: `ask --allow-tools`)."""
    cfg = config.get(server)
    if cfg is not None and cfg.trusted:
        return True
    if approvals is not None and approvals.allowed(server, tool):
        return True
    names = set(allowed)
    return server in names or f"{server}/{tool}" in names


def arguments(call: ToolCall) -> dict | None:
    """The call's arguments as the server takes them: a JSON object (None: the model wrote none,
    or something else, and the call is answered with that instead of being made)."""
    if not call.arguments.strip():
        return {}
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


BAD_ARGUMENTS = "The call was not made: its arguments are not a JSON object."


def answer(result: CallResult) -> str:
    """What the model reads of a result: the server's text, an error said as one."""
    text = result.text
    if result.is_error and not text.lower().startswith("error"):
        return f"Error: {text}"
    return text


def tool_message(call: ToolCall, fn: McpFunction, text: str) -> MessageBody:
    """The result as the conversation keeps it, with the server that gave it."""
    return MessageBody("tool", text, tool_call_id=call.id, tool_name=call.name, tool_server=fn.server)


def timeout_of(config: McpConfig, server: str, default: float = 60.0) -> float:
    cfg = config.get(server)
    return cfg.timeout_s if cfg is not None else default


def describe(call: ToolCall, fn: McpFunction, width: int = 160) -> str:
    """'time/get_current_time {"timezone": "Asia/Tokyo"}' on one line, cut to `width`."""
    args = " ".join(call.arguments.split()) or "{}"
    line = f"{fn.server}/{fn.tool} {args}"
    return line if len(line) <= width else line[: width - 1] + "…"
