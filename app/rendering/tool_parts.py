"""Tool calls and tool results as what they are, for every way a conversation is shown.

A call is the tool's name and its arguments pretty-printed as highlighted JSON;
a result is a block that names the tool it came from. Written once as Markdown
here, so the window's view, the Markdown and the HTML export draw the same
thing (the HTML and the window through the one renderer), and once as plain
lines for the text export. The raw JSON a model wrote to make a call is never
what a reader sees. A result an MCP server gave names the server, and a call
the user denied or cancelled is headed so, not dressed as the tool's answer.
"""

from __future__ import annotations

import json

from app.engine.message import MessageBody, ToolCall
from app.rendering.markdown_html import code_markdown, json_markdown

# What the model is told of an MCP call the user turned down or stopped (app.chat.mcp_calls).
DENIED = "The user denied this call."
CANCELLED = "The user cancelled this call before it returned."


def pretty_arguments(arguments: str) -> str:
    """Indented JSON; text that is not JSON (a server's, cut by max tokens) as it came."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):
        return arguments


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return text.strip()[:1] in ("{", "[")


def calls_markdown(calls: tuple[ToolCall, ...]) -> str:
    return "\n".join(f"**Tool call · `{c.name}`**\n\n{json_markdown(c.arguments)}" for c in calls)


def result_markdown(name: str | None, content: str, server: str | None = None) -> str:
    """A tool's result: JSON highlighted, other text in a plain box, as it was returned; `server`:
    the MCP server that answered (or was not let answer)."""
    body = json_markdown(content) if _is_json(content) else code_markdown(content.strip("\n"), "text")
    tool = f"`{name or 'a tool'}`"
    if server is None:
        return f"**Result of {tool}**\n\n{body}"
    if content == DENIED:
        return f"**Call of {tool} on MCP server `{server}`: denied**\n\n{body}"
    if content == CANCELLED:
        return f"**Call of {tool} on MCP server `{server}`: cancelled**\n\n{body}"
    return f"**Result of {tool} from MCP server `{server}`**\n\n{body}"


def message_markdown(m: MessageBody, content_markdown: str) -> str:
    """A message's Markdown with its tool parts: a result in place of the bare text, the calls
    after what the reply said (often nothing)."""
    if m.role == "tool":
        return result_markdown(m.tool_name, content_markdown, m.tool_server)
    if not m.tool_calls:
        return content_markdown
    head = f"{content_markdown}\n\n" if content_markdown.strip() else ""
    return head + calls_markdown(m.tool_calls)


def calls_text(calls: tuple[ToolCall, ...], indent: str = "  ") -> list[str]:
    """Plain lines: the tool's name, then its arguments indented under it."""
    out = []
    for c in calls:
        out.append(f"Tool call: {c.name}")
        out += [indent + line for line in pretty_arguments(c.arguments).splitlines()]
    return out
