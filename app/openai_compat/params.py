"""An OpenAI request body, checked field by field: honoured, or refused naming the parameter.

Never silently ignored: a client that asks for n=3, logprobs or an image
and gets one plain answer about nothing has been lied to. What is honoured:
the sampling fields, stop strings, streaming, response_format (text, any
JSON object, a JSON schema), llama-server's own `json_schema` and `grammar`,
and tools with tool_choice and parallel_tool_calls (app.openai_compat.tools).
A constraint is compiled here, so one that cannot be enforced is refused
before the request queues for a slot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.engine.grammar import Constraint, GrammarError, compile_grammar
from app.engine.prompt import PromptMessage
from app.engine.sampling import GenerationSettings
from app.openai_compat.errors import RequestError, bad
from app.openai_compat.fields import is_text, messages, settings_from_body
from app.openai_compat.tools import ToolCalls, parse_tools

# Fields that carry no behaviour we could fail to honour; `cache_prompt` is llama-server's own:
# LlamaDesk always reuses a cached prefix.
HARMLESS = {"user", "metadata", "store", "service_tier", "cache_prompt"}
COMMON = {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
          "repeat_penalty", "seed", "stop", "stream", "stream_options", "n", "logprobs", "top_logprobs",
          "presence_penalty", "frequency_penalty", "logit_bias", "ignore_eos", "response_format",
          "json_schema", "grammar"}
CHAT = COMMON | {"messages", "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
                 "reasoning_effort", "modalities", "audio", "prediction", "web_search_options"}
COMPLETION = COMMON | {"prompt", "echo", "best_of", "suffix"}


@dataclass
class Parsed:
    model: str
    settings: GenerationSettings
    stream: bool
    include_usage: bool
    messages: list[PromptMessage] | None = None
    prompt: str | None = None
    tools: ToolCalls | None = None  # the reply is read as tool calls (or a response)


def _unsupported(body: dict, allowed: set[str]) -> None:
    for k in body:
        if k not in allowed and k not in HARMLESS:
            raise RequestError(400, f"Unrecognized request argument supplied: {k}", k, "unknown_parameter")
    n = body.get("n")
    if n is not None and n != 1:
        raise bad("n", "n must be 1: LlamaDesk returns one choice per request")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise bad("logprobs", "logprobs are not supported by this server")
    for k in ("presence_penalty", "frequency_penalty"):
        v = body.get(k)
        if v not in (None, 0, 0.0):
            raise bad(k, f"{k} is not supported (use repeat_penalty, llama.cpp's own)")
    if body.get("logit_bias"):
        raise bad("logit_bias", "logit_bias is not supported by this server")
    for k in ("functions", "function_call", "audio", "prediction", "web_search_options", "reasoning_effort"):
        if body.get(k):
            raise bad(k, f"{k} is not supported by this server (functions: use tools)")
    if body.get("modalities") not in (None, ["text"]):
        raise bad("modalities", "only text output is supported")
    if body.get("echo") or (body.get("best_of") not in (None, 1)) or body.get("suffix"):
        k = "echo" if body.get("echo") else "best_of" if body.get("best_of") not in (None, 1) else "suffix"
        raise bad(k, f"{k} is not supported by this server")


def _param_of(message: str) -> str:
    first = message.split()[0] if message else ""
    return first.removeprefix("body.").split("[")[0].split(".")[0]


def constraint_of(body: dict) -> tuple[Constraint | None, str | None]:
    """The constraint the body asks for, and the parameter that asked (None, None: free text)."""
    asked = [k for k in ("response_format", "json_schema", "grammar") if body.get(k) is not None]
    if len(asked) > 1:
        raise bad(asked[1], f"give one of {', '.join(asked)}, not several")
    if not asked:
        return None, None
    key = asked[0]
    v = body[key]
    if key == "grammar":
        if not isinstance(v, str) or not v.strip() or not is_text(v):
            raise bad(key, "grammar must be a GBNF grammar (text)")
        return Constraint("gbnf", v), key
    if key == "json_schema":
        if not isinstance(v, dict):
            raise bad(key, "json_schema must be a JSON schema object")
        return Constraint.json_schema(v), key
    if not isinstance(v, dict) or v.get("type") not in ("text", "json_object", "json_schema"):
        raise bad(key, 'response_format must be {"type": "text"}, {"type": "json_object"} or '
                       '{"type": "json_schema", "json_schema": {...}}')
    if v["type"] == "text":
        return None, None
    if v["type"] == "json_object":
        return Constraint.any_json(), key
    spec = v.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
        raise bad(key, 'response_format json_schema needs {"name": ..., "schema": {...}}')
    if spec.get("strict") not in (None, True, False):
        raise bad(key, "response_format json_schema.strict must be true or false")
    return Constraint.json_schema(spec.get("schema") or {"type": "object"}), key


def _compiled(c: Constraint | None, param: str | None) -> Constraint | None:
    if c is not None:
        try:
            compile_grammar(c)
        except GrammarError as e:
            raise bad(param or "response_format", str(e)) from None
    return c


def with_tools(msgs: list[PromptMessage], tools: ToolCalls) -> list[PromptMessage]:
    """The tools described ahead of the conversation's own system prompt."""
    head = tools.instructions()
    if msgs and msgs[0].role == "system":
        return [PromptMessage("system", f"{head}\n\n{msgs[0].content}"), *msgs[1:]]
    return [PromptMessage("system", head), *msgs]


def parse(body, kind: str, defaults: GenerationSettings) -> Parsed:
    """`kind` "chat" or "completion"; raises RequestError."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object", None, "invalid_json")
    _unsupported(body, CHAT if kind == "chat" else COMPLETION)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "model is required (see GET /v1/models)")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("stream", "stream must be true or false")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise bad("stream_options", "stream_options must be an object")
    if body.get("ignore_eos") is not None and not isinstance(body["ignore_eos"], bool):
        raise bad("ignore_eos", "ignore_eos must be true or false")
    try:
        s = settings_from_body(body, defaults)
        s.ignore_eos = bool(body.get("ignore_eos", False))
        msgs = messages(body.get("messages")) if kind == "chat" else None
    except (ValueError, OverflowError) as e:
        raise bad(_param_of(str(e)), str(e).removeprefix("body.")) from None
    tools = parse_tools(body) if kind == "chat" else None
    constraint, param = constraint_of(body)
    if tools is not None:
        if constraint is not None:
            raise bad(param or "response_format", f"{param} together with tools is not supported: "
                                                  "give the structure as a tool's parameters")
        constraint, param = tools.constraint(), "tools"
        msgs = with_tools(msgs or [], tools)
    s = replace(s, constraint=_compiled(constraint, param))
    prompt = None
    if kind == "completion":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt or not is_text(prompt):
            raise bad("prompt", "prompt must be a non-empty string (one prompt per request)")
    return Parsed(model, s, stream, bool(opts.get("include_usage")), msgs, prompt, tools)

