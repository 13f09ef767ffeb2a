"""What a tool call gives back to the model: text, with everything it cannot read named.

The local models read text only. An image or a binary resource dropped silently would
leave the model (and the user reading the card) thinking the tool returned less than it
did, so each is named in its place and in the notes. A result far longer than the
context would push the whole conversation out, so it is cut to a set size, and the cut
is said in the text the model gets as well as in the notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import mcp_types as types

IMAGE_OMITTED = "image omitted: this model reads text"
AUDIO_OMITTED = "audio omitted: this model reads text"


@dataclass(frozen=True)
class CallResult:
    text: str  # what goes back to the model (text parts joined; images/resources named)
    is_error: bool = False  # the server said isError, or the call failed/timed out
    notes: tuple[str, ...] = ()  # e.g. "image omitted: this model reads text"


def failed(line: str) -> CallResult:
    return CallResult(line, is_error=True, notes=(line,))


def _part(block, notes: list[str]) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        notes.append(IMAGE_OMITTED)
        return f"[{IMAGE_OMITTED}]"
    if isinstance(block, types.AudioContent):
        notes.append(AUDIO_OMITTED)
        return f"[{AUDIO_OMITTED}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return res.text
        note = f"resource omitted: {res.uri}"
        notes.append(note)
        return f"[{note}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}]"
    kind = getattr(block, "type", type(block).__name__)
    notes.append(f"{kind} omitted")
    return f"[{kind} omitted]"


def cut(text: str, limit: int, notes: list[str]) -> str:
    if len(text) <= limit:
        return text
    note = f"cut from {len(text):,} to {limit:,} characters"
    notes.append(note)
    return f"{text[:limit]}\n[{note}]"


def from_sdk(result: types.CallToolResult, limit: int) -> CallResult:
    notes: list[str] = []
    parts = [_part(block, notes) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = cut("\n".join(parts), limit, notes)
    return CallResult(text, is_error=bool(result.is_error), notes=tuple(dict.fromkeys(notes)))
