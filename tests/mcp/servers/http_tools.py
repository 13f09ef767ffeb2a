"""A streamable-HTTP (or SSE) MCP server built with the SDK's own MCPServer (FastMCP in mcp 1).

    python http_tools.py PORT [streamable-http|sse]

Its tools give back what the hub must turn into text: plain text, an image and a
binary resource beside text, a result far longer than any context, and a tool error.
"""

import base64
import sys

import mcp_types as types
from mcp.server.mcpserver import MCPServer

server = MCPServer("llamadesk-test-http")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def picture() -> list:
    """A caption, a picture and the picture's file."""
    return [types.TextContent(text="a red dot"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            types.EmbeddedResource(resource=types.BlobResourceContents(
                uri="file:///tmp/red-dot.png", blob=PNG, mime_type="image/png"))]


@server.tool()
def big(n: int) -> str:
    """n characters of text."""
    return "0123456789" * (n // 10)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the tool failed on purpose")


if __name__ == "__main__":
    port = int(sys.argv[1])
    transport = sys.argv[2] if len(sys.argv) > 2 else "streamable-http"
    server.run(transport, host="127.0.0.1", port=port)  # type: ignore[call-overload]
