"""Tool calls for any model: the tools described in the prompt, the call enforced by a grammar.

A model whose chat template knows tools writes calls in its own syntax; most
GGUF models, the bundled base model among them, know none. LlamaDesk uses one
format for every model, the one llama-server calls "Generic": the tools and
an example call go into the system message, and the reply is held by the
grammar (app.engine.grammar) to a JSON object that is either a list of calls,
each naming a declared tool with arguments valid for its parameters, or a
plain response. With tool_choice "required" or a named function only calls
are allowed, so a call is guaranteed (llama-server answers those in text on
this model). The reply is read back into OpenAI's `tool_calls` here, once, for
the online API and batch output alike.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from app.engine.grammar import Constraint
from app.openai_compat.fields import is_text
from app.openai_compat.refusal import RequestError, bad

MAX_PARALLEL = 8  # calls in one reply when parallel calls are allowed: a bound keeps a reply finite
ANY_ARGS = {"type": "object"}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class ToolCalls:
    """How a request's reply is read: the tools it may call, and whether it must call one."""

    tools: tuple[Tool, ...]
    choice: str  # "auto", "required", or "answer" (the tools known, none callable: a loop's last reply)
    parallel: bool

    def instructions(self) -> str:
        """What the system message tells the model, before the user's own system prompt."""
        listed = json.dumps([{"name": t.name, "description": t.description, "parameters": t.parameters}
                             for t in self.tools], ensure_ascii=False)
        one = self.tools[0]
        # An example with empty arguments: a small model copies stand-in values ("...") into real calls.
        example = json.dumps({"tool_calls": [{"name": one.name, "arguments": {}}]})
        answer = ('reply with a JSON object whose "response" string is your reply to the user, in full')
        if self.choice == "answer":  # the same first line: the prompt's cached prefix still holds
            return "\n".join([f"You have these tools: {listed}", f"Call no more tools now: {answer}"])
        lines = [f"You have these tools: {listed}",
                 f"When a tool can answer the request, call it: answer with JSON only, like {example}"]
        if self.choice == "auto":
            # No stand-in value here either: after a tool's result the model copied "your answer".
            lines.append(f"Only when no tool can help, or a tool has already answered, {answer}")
        return "\n".join(lines)

    def constraint(self) -> Constraint:
        calls = {"type": "array", "minItems": 1, "maxItems": MAX_PARALLEL if self.parallel else 1,
                 "items": {"anyOf": [{"type": "object", "additionalProperties": False,
                                      "required": ["name", "arguments"],
                                      "properties": {"name": {"const": t.name}, "arguments": t.parameters}}
                                     for t in self.tools]}}
        call = {"type": "object", "additionalProperties": False, "required": ["tool_calls"],
                "properties": {"tool_calls": calls}}
        if self.choice == "required":
            return Constraint.json_schema(call)
        text = {"type": "object", "additionalProperties": False, "required": ["response"],
                "properties": {"response": {"type": "string"}}}
        return Constraint.json_schema(text if self.choice == "answer" else {"anyOf": [call, text]})

    def read(self, text: str) -> tuple[str | None, list[dict]]:
        """(content, tool_calls) of a reply in this format; a reply cut before its end (max_tokens)
        is returned as content, for the client to see what there was."""
        try:
            doc = json.loads(text)
        except ValueError:
            return text, []
        if not isinstance(doc, dict):
            return text, []
        if isinstance(doc.get("response"), str):
            return doc["response"], []
        calls = doc.get("tool_calls")
        if not isinstance(calls, list):
            return text, []
        return None, [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                       "function": {"name": c["name"],
                                    "arguments": json.dumps(c.get("arguments", {}), ensure_ascii=False)}}
                      for c in calls if isinstance(c, dict) and isinstance(c.get("name"), str)]


def parse_tools(body: dict) -> ToolCalls | None:
    """The request's tools and tool_choice, checked; None when no tool may be called."""
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None or raw == []:
        if choice not in (None, "none", "auto"):
            raise bad("tool_choice", "tool_choice needs tools")
        return None
    if not isinstance(raw, list):
        raise bad("tools", "tools must be a list of {\"type\": \"function\", \"function\": {...}}")
    tools = tuple(_tool(i, t) for i, t in enumerate(raw))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise bad("tools", "two tools have the same name")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise bad("parallel_tool_calls", "parallel_tool_calls must be true or false")
    if choice is None or choice == "auto":
        return ToolCalls(tools, "auto", parallel)
    if choice == "none":
        return None
    if choice == "required":
        return ToolCalls(tools, "required", parallel)
    named = isinstance(choice, dict) and choice.get("type") == "function"
    if named and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        chosen = tuple(t for t in tools if t.name == name)
        if not chosen:
            raise bad("tool_choice", f"tool_choice names {name!r}, which is not among the tools")
        return ToolCalls(chosen, "required", False)  # a forced function is called once, as OpenAI does
    raise bad("tool_choice", 'tool_choice must be "none", "auto", "required" or '
                             '{"type": "function", "function": {"name": ...}}')


def _tool(i: int, t) -> Tool:
    where = f"tools[{i}]"
    if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
        raise RequestError(400, f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}", "tools",
                           "invalid_value")
    f = t["function"]
    name, desc, params = f.get("name"), f.get("description", ""), f.get("parameters", ANY_ARGS)
    if not isinstance(name, str) or not name or not is_text(name) or len(name) > 64:
        raise bad("tools", f"{where}.function.name must be a name of 1 to 64 characters")
    if not isinstance(desc, str) or not is_text(desc):
        raise bad("tools", f"{where}.function.description must be text")
    if not isinstance(params, dict):
        raise bad("tools", f"{where}.function.parameters must be a JSON schema object")
    return Tool(name, desc, params or ANY_ARGS)
