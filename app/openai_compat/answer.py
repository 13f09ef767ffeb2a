"""A finished reply as OpenAI's assistant message: text, or the tool calls it made.

The online API and the batch output both answer through here, so a batch
line with tools gets the same `tool_calls` and finish_reason an online
request would.
"""

from __future__ import annotations

from app.openai_compat.tools import ToolCalls

# OpenAI has no finish_reason for an error or a cancel; an answer cut short by one reads "stop".
FINISH = {"stop": "stop", "length": "length", "error": "stop", "cancelled": "stop"}


def assistant_message(text: str, tools: ToolCalls | None, stop_reason: str,
                      reasoning: str = "") -> tuple[dict, str]:
    """(the message, its finish_reason). A thinking reply's `reasoning` is llama-server's
    `reasoning_content`, there only when there is some, as llama-server writes it."""
    finish = FINISH.get(stop_reason, "stop")
    thought = {"reasoning_content": reasoning} if reasoning else {}
    if tools is None:
        return {"role": "assistant", "content": text, **thought}, finish
    content, calls = tools.read(text)
    message: dict = {"role": "assistant", "content": content, **thought}
    if calls:
        message["tool_calls"] = calls
        finish = "tool_calls"
    return message, finish
