"""A conversation with tool calls, as each kind of engine is given it, and a reply read back as calls.

A server that takes OpenAI's messages gets them as OpenAI writes them (an
assistant's `tool_calls`, a `tool` message per result) with the tools in the
request. The local model, and a server sent LlamaDesk's own transcript, get
what LlamaDesk's server gives the model for the same request: the tools
described in the system prompt and the history written out in the generic
tool format, by the server's own code (app.openai_compat), so a chat turn and
an API request with the same history read exactly alike to the model; the
reply is held to the format by its grammar and read back into calls here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.chat.reply import Reply
from app.engine.message import MessageBody, ToolCall
from app.engine.sampling import GenerationSettings
from app.history.records import JSON_REPLY
from app.openai_compat.fields import messages as prompt_messages
from app.openai_compat.params import with_tools
from app.openai_compat.tools import ToolCalls


def wire(m: MessageBody) -> dict:
    """One message as OpenAI's chat API takes it."""
    d: dict = {"role": m.role, "content": m.content}
    if m.tool_calls:
        d["content"] = m.content or None
        d["tool_calls"] = [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
    if m.role == "tool":
        d["tool_call_id"] = m.tool_call_id or f"call_{m.tool_name}"
        if m.tool_name:
            d["name"] = m.tool_name
    return d


def wire_conversation(history: list[MessageBody], user_text: str | None, system: str | None) -> list[dict]:
    head = [{"role": "system", "content": system}] if system and system.strip() else []
    tail = [{"role": "user", "content": user_text}] if user_text is not None else []
    return [*head, *(wire(m) for m in history), *tail]


def needs_writing(history: list[MessageBody], user_text: str | None, tools: ToolCalls | None) -> bool:
    """Whether the prompt must be written in the tool format (else it goes as it is)."""
    return tools is not None or user_text is None or any(m.tool_calls or m.role == "tool" for m in history)


@dataclass
class LocalTurn:
    """A turn as a prompt format renders it: no tool roles left, the tools in the system text."""

    history: list[MessageBody]
    user_text: str
    system: str | None
    settings: GenerationSettings


def local_turn(history: list[MessageBody], user_text: str | None, system: str | None,
               settings: GenerationSettings, tools: ToolCalls | None) -> LocalTurn:
    """`user_text` None: the turn continues after the history's last message (a tool's result,
    which the tool format writes as the user's turn). The history keeps its length and order, so
    the context budget's dropped indices still name the caller's messages."""
    msgs = prompt_messages(wire_conversation(history, user_text, system))
    if tools is not None:
        msgs = with_tools(msgs, tools)
        settings = replace(settings, constraint=tools.constraint())
    head = msgs[0].content if msgs and msgs[0].role == "system" else None
    body = msgs[1:] if head is not None else msgs
    return LocalTurn(body[:-1], body[-1].content, head, settings)


def read_reply(reply: Reply, tools: ToolCalls | None) -> Reply:
    """A reply in the tool format as its answer (the response's text) or its calls."""
    if tools is None:
        return reply
    content, calls = tools.read(reply.text)
    if not calls and content == reply.text and reply.text.lstrip().startswith("{"):
        reply.format = JSON_REPLY  # not read (cut by max_tokens): shown as the JSON it is
    reply.text = content or ""
    reply.tool_calls = tuple(ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                             for c in calls)
    return reply


def tools_body(tools: ToolCalls) -> dict:
    """The request fields that give a server the tools (OpenAI's names)."""
    forced = tools.choice == "required" and len(tools.tools) == 1 and not tools.parallel
    choice: str | dict = ({"type": "function", "function": {"name": tools.tools[0].name}} if forced
                          else "none" if tools.choice == "answer" else tools.choice)
    return {"tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                        "parameters": t.parameters}} for t in tools.tools],
            "tool_choice": choice, "parallel_tool_calls": tools.parallel}
