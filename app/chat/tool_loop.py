"""After a reply that called tools: run LlamaDesk's own, give the model the results, ask again.

One loop for every front end that answers without a person in between
(`ask`), and the steps the window takes one signal at a time: the built-in
calls run here (app.chat.builtin_tools), a call of a tool the user declared
waits for the user's result, and the model is asked again after the results
until it answers in text; ToolSet.calls withholds the tools from the last
reply the loop allows, so it always ends in an answer. A call of an MCP
server's tool is handed to the front end's `mcp` (which asks the user, runs it
on the hub and says what the model is told: app.chat.mcp_calls); without one
it waits like a declared tool's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.chat import builtin_tools
from app.chat.reply import Reply
from app.chat.tool_set import MAX_ROUNDS, McpFunction, ToolSet
from app.engine.message import ToolCall
from app.openai_compat.tools import ToolCalls

Result = tuple[ToolCall, str]
Continue = Callable[[list[Result], ToolCalls | None], Reply]  # results given; what the next reply may call
McpAnswer = Callable[[ToolCall, McpFunction], str]  # an MCP call, asked about and run: what the model reads


@dataclass
class Ran:
    done: list[Result] = field(default_factory=list)  # built-in calls, run
    waiting: list[ToolCall] = field(default_factory=list)  # declared tools' calls: the user answers
    mcp: list[tuple[ToolCall, McpFunction]] = field(default_factory=list)  # MCP servers' calls, not run


def run_builtin(calls: tuple[ToolCall, ...], tools: ToolSet, run: bool = True) -> Ran:
    """Run the calls of built-in tools (all of them wait when `run` is False); MCP servers' calls
    are sorted out for the front end, which asks the user before any runs."""
    out = Ran()
    for c in calls:
        fn = tools.mcp_target(c.name) if run else None
        if run and tools.is_builtin(c.name):
            out.done.append((c, builtin_tools.run(c)))
        elif fn is not None:
            out.mcp.append((c, fn))
        else:
            out.waiting.append(c)
    return out


def follow(first: Reply, tools: ToolSet, again: Continue, run: bool = True,
           on_result: Callable[[ToolCall, str], None] | None = None,
           max_rounds: int = MAX_ROUNDS, mcp: McpAnswer | None = None) -> tuple[list[Reply], list[ToolCall]]:
    """Every reply of the turn, and the calls left for the user to answer (the loop stops there)."""
    replies, round_no = [first], 0
    while replies[-1].tool_calls and round_no + 1 < max_rounds:
        ran = run_builtin(replies[-1].tool_calls, tools, run)
        for c, fn in ran.mcp:
            if mcp is None:
                ran.waiting.append(c)
            else:
                ran.done.append((c, mcp(c, fn)))
        for c, result in ran.done:
            if on_result is not None:
                on_result(c, result)
        if ran.waiting:
            return replies, ran.waiting
        round_no += 1
        replies.append(again(ran.done, tools.calls(round_no, max_rounds)))
    return replies, []
