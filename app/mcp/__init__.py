"""Tools from MCP servers: their config, their processes and sessions, and their calls.

Below the chat: it knows nothing of conversations or windows, only servers,
their tools and what a call returned. The official SDK (`mcp`) speaks the
protocol, on an asyncio loop of its own, off any GUI thread.
"""
