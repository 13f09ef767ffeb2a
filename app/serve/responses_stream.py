"""A streamed /v1/responses reply: OpenAI's event sequence, its output items opened as they begin.

A thinking model's reply is two items, its reasoning then its message, so an
item is opened when its first text arrives rather than up front: the
reasoning item (`response.reasoning_text.delta`, as OpenAI streams a
reasoning model's text) at the first reasoning delta, the message at the
first answer delta, each closed before the next opens. Output indexes are
given in that order, which is the finished response's `output` order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

from app.engine.events import ReasoningDelta, TextDelta


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class ItemStream:
    """The events of one streamed response, as dicts for the SSE stream."""

    def __init__(self, streaming_text: bool):
        """`streaming_text` False: a tool-format reply, whose message is known only once whole."""
        self.streaming_text = streaming_text
        self._seq = iter(range(1 << 62))
        self.reasoning_id = new_id("rs")
        self.message_id = new_id("msg")
        self._next = 0
        self._opened: dict[str, int] = {}  # "reasoning" / "message" -> its output index
        self._closed: set[str] = set()
        self._thought: list[str] = []

    def event(self, kind: str, **data) -> dict:
        return {"event": kind, "data": json.dumps({"type": kind, "sequence_number": next(self._seq), **data},
                                                  ensure_ascii=False)}

    def _open(self, kind: str, item: dict, part: dict | None) -> Iterator[dict]:
        i = self._opened[kind] = self._next
        self._next += 1
        yield self.event("response.output_item.added", output_index=i, item=item)
        if part is not None:
            yield self.event("response.content_part.added", item_id=item["id"], output_index=i,
                             content_index=0, part=part)

    def _reasoning_item(self, status: str) -> dict:
        text = "".join(self._thought)
        content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
        return {"type": "reasoning", "id": self.reasoning_id, "summary": [], "content": content,
                "status": status}

    def close_reasoning(self) -> Iterator[dict]:
        if "reasoning" not in self._opened or "reasoning" in self._closed:
            return
        self._closed.add("reasoning")
        i, text = self._opened["reasoning"], "".join(self._thought)
        yield self.event("response.reasoning_text.done", item_id=self.reasoning_id, output_index=i,
                         content_index=0, text=text)
        yield self.event("response.content_part.done", item_id=self.reasoning_id, output_index=i,
                         content_index=0, part={"type": "reasoning_text", "text": text})
        yield self.event("response.output_item.done", output_index=i, item=self._reasoning_item("completed"))

    def open_message(self) -> Iterator[dict]:
        if "message" in self._opened:
            return
        yield from self.close_reasoning()
        item = {"type": "message", "id": self.message_id, "status": "in_progress", "role": "assistant",
                "content": []}
        part = {"type": "output_text", "text": "", "annotations": []} if self.streaming_text else None
        yield from self._open("message", item, part)

    def delta(self, ev) -> Iterator[dict]:
        """A reasoning or answer delta's events (an answer's only while its text streams)."""
        if isinstance(ev, ReasoningDelta):
            if "reasoning" not in self._opened:
                yield from self._open("reasoning", self._reasoning_item("in_progress"),
                                      {"type": "reasoning_text", "text": ""})
            self._thought.append(ev.text)
            yield self.event("response.reasoning_text.delta", item_id=self.reasoning_id,
                             output_index=self._opened["reasoning"], content_index=0, delta=ev.text)
        elif isinstance(ev, TextDelta) and self.streaming_text:
            yield from self.open_message()
            yield self.event("response.output_text.delta", item_id=self.message_id,
                             output_index=self._opened["message"], content_index=0, delta=ev.text,
                             logprobs=[])

    def finish(self, output: list[dict]) -> Iterator[dict]:
        """The finished response's items: those still open are closed, the rest sent whole."""
        yield from self.close_reasoning()
        for i, item in enumerate(output):
            if item["type"] == "reasoning":
                continue  # streamed and closed above
            if item["type"] == "message":
                yield from self.open_message()
                text = item["content"][0]["text"] if item["content"] else ""
                yield self.event("response.output_text.done", item_id=item["id"], output_index=i,
                                 content_index=0, text=text, logprobs=[])
                yield self.event("response.content_part.done", item_id=item["id"], output_index=i,
                                 content_index=0, part=item["content"][0] if item["content"] else {})
            else:
                yield self.event("response.output_item.added", output_index=i,
                                 item={**item, "arguments": "", "status": "in_progress"})
                yield self.event("response.function_call_arguments.delta", item_id=item["id"],
                                 output_index=i, delta=item["arguments"])
                yield self.event("response.function_call_arguments.done", item_id=item["id"],
                                 output_index=i, arguments=item["arguments"])
            yield self.event("response.output_item.done", output_index=i, item=item)

