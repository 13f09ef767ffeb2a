"""A turn with tools as `ask` shows it: printed as it happened, or its calls for `--json`.

Apart from the command's flow so the printing, which grows with each kind of
tool (built-in, declared, an MCP server's), is read in one place.
"""

from __future__ import annotations

import json
import sys

from app.chat.reply import Reply
from app.chat.tool_loop import Result
from app.chat.tool_set import ToolSet
from app.commands import ask_mcp
from app.commands.thinking import ThinkingPrinter
from app.rendering.tool_parts import pretty_arguments


def calls_json(replies: list[Reply], results: list[Result]) -> list[dict]:
    """Every call of the turn with its arguments (parsed when they are JSON) and its result."""
    got = {c.id: text for c, text in results}
    out = []
    for r in replies:
        for c in r.tool_calls:
            try:
                args = json.loads(c.arguments)
            except ValueError:
                args = c.arguments
            out.append({"id": c.id, "name": c.name, "arguments": args, "result": got.get(c.id)})
    return out


def print_replies(replies: list[Reply], results: list[Result],
                   thinking: ThinkingPrinter | None = None, tools: ToolSet | None = None) -> None:
    """The turn as it happened: each call as the tool's name (and its MCP server) and its
    arguments, each result under the tool's name, and the text the model wrote (with --no-stream,
    each reply's thinking first, on stderr)."""
    got = {c.id: text for c, text in results}
    for r in replies:
        if thinking is not None:
            sys.stdout.flush()  # stdout and stderr in the order they were written, on one terminal
            thinking.whole(r.reasoning)
        if r.text:
            sys.stdout.write(r.text + ("\n" if r.tool_calls else ""))
        for c in r.tool_calls:
            server = ask_mcp.server_of(tools, c) if tools is not None else None
            sys.stdout.write(f"→ tool call: {c.name}" + (f" (MCP server {server})" if server else "") + "\n")
            sys.stdout.write("".join(f"    {line}\n" for line in pretty_arguments(c.arguments).splitlines()))
            if c.id in got:
                sys.stdout.write(f"← {c.name} returned:\n")
                sys.stdout.write("".join(f"    {line}\n" for line in got[c.id].splitlines()))
