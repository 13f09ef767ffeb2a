"""A streamed reply's tool calls, put together from OpenAI's `delta.tool_calls` pieces.

A server streams a call as pieces keyed by `index`: the first names the call
(id, function name), the later ones add to its arguments' text. Every piece is
untrusted input: one that is not shaped so is refused as a malformed stream,
like any other bad chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CALLS = 64  # calls in one reply: past this a stream is not a reply


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallDeltas:
    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}

    def feed(self, delta) -> str | None:
        """Take a chat delta's tool-call pieces; the reason it is malformed, or None."""
        if not isinstance(delta, dict) or delta.get("tool_calls") is None:
            return None
        pieces = delta["tool_calls"]
        if not isinstance(pieces, list):
            return "'tool_calls' is not a list"
        for p in pieces:
            if not isinstance(p, dict):
                return "a tool call piece is not an object"
            index = p.get("index", len(self._calls) if p.get("id") else max(self._calls, default=0))
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_CALLS:
                return "a tool call's index is not a small whole number"
            call = self._calls.setdefault(index, _Call())
            f = p.get("function") or {}
            if not isinstance(f, dict):
                return "a tool call's function is not an object"
            for key, value in (("id", p.get("id")), ("name", f.get("name"))):
                if value is not None and not isinstance(value, str):
                    return f"a tool call's {key} is not text"
                if value:
                    setattr(call, key, value)
            args = f.get("arguments")
            if args is not None and not isinstance(args, str):
                return "a tool call's arguments are not text"
            if args:
                call.arguments.append(args)
        return None

    def calls(self) -> list[tuple[str, str, str]]:
        """(id, name, arguments) of each named call, in index order."""
        return [(c.id or f"call_{i}", c.name, "".join(c.arguments) or "{}")
                for i, c in sorted(self._calls.items()) if c.name]
