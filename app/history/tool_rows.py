"""Tool calls as the messages table keeps them: one JSON list of {id, name, arguments} a row.

A list in one column rather than a table of its own: the calls are read and
written only with their message, and the JSON transcript carries them the
same way. A value a hand edit broke reads as no calls (said in the log), so
the conversation still opens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from app.engine.message import ToolCall

log = logging.getLogger("llamadesk.store")


def calls_json(calls: Iterable[ToolCall]) -> str | None:
    shown = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    return json.dumps(shown, ensure_ascii=False) if shown else None


def calls_from_json(text: str | None) -> tuple[ToolCall, ...]:
    if not text:
        return ()
    try:
        return calls_from_list(json.loads(text))
    except ValueError as e:
        log.warning("a message's stored tool calls cannot be read (%s); shown without them", e)
        return ()


def calls_from_list(raw) -> tuple[ToolCall, ...]:
    """Checked: ValueError naming the first entry that is not {id, name, arguments} of text."""
    if not isinstance(raw, list):
        raise ValueError("tool_calls should be a list")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("id", "name", "arguments")):
            raise ValueError(f"tool_calls[{i}] should be {{\"id\", \"name\", \"arguments\"}}, each text")
        if not c["name"]:
            raise ValueError(f"tool_calls[{i}].name is empty")
        out.append(ToolCall(c["id"], c["name"], c["arguments"]))
    return tuple(out)
