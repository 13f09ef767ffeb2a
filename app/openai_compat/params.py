"""An OpenAI request body, checked field by field: honoured, or refused naming the parameter.

Never silently ignored: a client that asks for best_of or an image and gets
one plain answer about nothing has been lied to. What is honoured: the
sampling fields with OpenAI's penalties and logit_bias, stop strings,
streaming, n choices, logprobs (and a completion's echo), prompts as text or
token ids, response_format (text, any JSON object, a JSON schema),
llama-server's own `json_schema` and `grammar`, and tools with tool_choice and
parallel_tool_calls (app.openai_compat.tools), a thinking model's fields
(app.openai_compat.reasoning_params). A constraint is compiled here,
so one that cannot be enforced is refused before the request queues for a
slot. Token ids are checked against a vocabulary by whoever knows the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.engine.grammar import Constraint, GrammarError, compile_grammar
from app.engine.logprobs import MAX_TOP
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.openai_compat.fields import is_text, messages, real, settings_from_body, show, whole
from app.openai_compat.reasoning_params import FIELDS as REASONING_FIELDS
from app.openai_compat.reasoning_params import ReasoningAsk, reasoning_of
from app.openai_compat.refusal import RequestError, bad
from app.openai_compat.tools import ToolCalls, parse_tools

# Fields that carry no behaviour we could fail to honour; `cache_prompt` is llama-server's own:
# LlamaDesk always reuses a cached prefix.
HARMLESS = {"user", "metadata", "store", "service_tier", "cache_prompt"}
COMMON = {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
          "repeat_penalty", "seed", "stop", "stream", "stream_options", "n", "logprobs", "top_logprobs",
          "presence_penalty", "frequency_penalty", "logit_bias", "ignore_eos", "response_format",
          "json_schema", "grammar"}
CHAT = COMMON | {"messages", "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
                 "reasoning_effort", "modalities", "audio", "prediction", "web_search_options",
                 *REASONING_FIELDS}
COMPLETION = COMMON | {"prompt", "echo", "best_of", "suffix"}
MAX_CHOICES = 64  # n x prompts in one request: each is a slot request of its own
# A completion that names no max_tokens writes this many, as OpenAI's and vLLM's do: clients
# written for them leave it out expecting a short continuation, not the chat default.
COMPLETION_MAX_TOKENS = 16
MAX_BIAS = 1024  # logit_bias entries

Prompt = str | list[int]  # a completion's prompt: text, or token ids taken as they are


@dataclass
class Parsed:
    model: str
    settings: GenerationSettings
    stream: bool
    include_usage: bool
    messages: list[MessageBody] | None = None
    prompts: list[Prompt] | None = None  # a completion's; one choice (or n) per prompt
    tools: ToolCalls | None = None  # the reply is read as tool calls (or a response)
    n: int = 1
    echo: bool = False  # a completion's text (and logprobs) start with its prompt's
    generate: bool = True  # False: echo with max_tokens 0, the prompt scored and nothing written
    constraint_param: str | None = None  # the field the constraint came from, for its refusals
    reasoning: ReasoningAsk = field(default_factory=ReasoningAsk)  # a thinking model's (chat only)

    @property
    def logprobs(self) -> bool:
        return self.settings.logprobs is not None

    @property
    def choices(self) -> int:
        return self.n * (len(self.prompts) if self.prompts is not None else 1)


def _unsupported(body: dict, allowed: set[str]) -> None:
    for k in body:
        if k not in allowed and k not in HARMLESS:
            raise RequestError(400, f"Unrecognized request argument supplied: {k}", k, "unknown_parameter")
    for k in ("functions", "function_call", "audio", "prediction", "web_search_options"):
        if body.get(k):
            raise bad(k, f"{k} is not supported by this server (functions: use tools)")
    if body.get("modalities") not in (None, ["text"]):
        raise bad("modalities", "only text output is supported")
    if body.get("best_of") not in (None, 1, body.get("n", 1)):
        raise bad("best_of", "best_of is not supported by this server (n gives every choice)")
    if body.get("suffix"):
        raise bad("suffix", "suffix is not supported by this server")


def _flag(body: dict, key: str) -> bool:
    v = body.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise bad(key, f"{key} must be true or false, got {show(v)}")
    return v


def _count(body: dict, key: str, lo: int, hi: int) -> int | None:
    if body.get(key) is None:
        return None
    try:
        v = whole(key, body[key])
    except ValueError as e:
        raise bad(key, str(e)) from None
    if not lo <= v <= hi:
        raise bad(key, f"{key} must be between {lo} and {hi}, got {v}")
    return v


def logprobs_of(body: dict, kind: str) -> int | None:
    """How many likeliest tokens to report beside each token's own log-probability; None: no
    logprobs. Chat asks with logprobs=true and top_logprobs=k, a completion with logprobs=k."""
    if kind == "chat":
        asked = _flag(body, "logprobs")
        top = _count(body, "top_logprobs", 0, MAX_TOP)
        if top is not None and not asked:
            raise bad("top_logprobs", "top_logprobs needs logprobs set to true")
        return (top or 0) if asked else None
    if isinstance(body.get("logprobs"), bool):  # a chat-style flag sent to the completions endpoint
        raise bad("logprobs", f"logprobs must be a whole number of top tokens (0 to {MAX_TOP}) here")
    return _count(body, "logprobs", 0, MAX_TOP)


def logit_bias_of(body: dict) -> tuple[tuple[int, float], ...]:
    """OpenAI's logit_bias: token ids (JSON keys, so strings) to a bias from -100 to 100."""
    raw = body.get("logit_bias")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise bad("logit_bias", "logit_bias must map token ids to numbers from -100 to 100")
    if len(raw) > MAX_BIAS:
        raise bad("logit_bias", f"logit_bias takes at most {MAX_BIAS} tokens, got {len(raw)}")
    out = []
    for k, v in raw.items():
        if not (isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= 9):
            raise bad("logit_bias", f"logit_bias keys must be token ids, got {show(k)}")
        try:
            bias = real(f"logit_bias[{k}]", v)
        except ValueError as e:
            raise bad("logit_bias", str(e)) from None
        if not -100 <= bias <= 100:
            raise bad("logit_bias", f"logit_bias[{k}] must be between -100 and 100, got {show(v)}")
        out.append((int(k), bias))
    return tuple(sorted(out))


def _ids(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(t, int) and not isinstance(t, bool)
                                                   and t >= 0 for t in v)


def prompts_of(raw) -> list[Prompt]:
    """A completion's prompt: a string, a list of strings, token ids, or a list of token-id lists."""
    if isinstance(raw, str) or _ids(raw):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise bad("prompt", "prompt must be a non-empty string, a list of them, token ids, or lists "
                            "of token ids")
    for i, x in enumerate(raw):
        if isinstance(x, str):
            if not x or not is_text(x):
                raise bad("prompt", f"prompt[{i}] must be non-empty valid text")
        elif not _ids(x):
            raise bad("prompt", f"prompt[{i}] must be a string or a non-empty list of token ids")
    return raw


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


def with_tools(msgs: list[MessageBody], tools: ToolCalls) -> list[MessageBody]:
    """The tools described ahead of the conversation's own system prompt."""
    head = tools.instructions()
    if msgs and msgs[0].role == "system":
        return [MessageBody("system", f"{head}\n\n{msgs[0].content}"), *msgs[1:]]
    return [MessageBody("system", head), *msgs]


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
    generate = True
    if kind == "completion" and body.get("max_tokens") == 0 and _flag(body, "echo"):
        body, generate = {**body, "max_tokens": 1}, False  # score the prompt, write nothing
    n = _count(body, "n", 1, MAX_CHOICES) or 1
    try:
        s = settings_from_body(body, defaults)
        if kind == "completion" and all(body.get(k) is None for k in ("max_tokens", "max_completion_tokens")):
            s.max_tokens = COMPLETION_MAX_TOKENS
        s.ignore_eos = bool(body.get("ignore_eos", False))
        s.logprobs = logprobs_of(body, kind)
        s.logit_bias = logit_bias_of(body)
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
    ask = ReasoningAsk()
    if kind == "chat":
        ask, s.think, s.think_budget = reasoning_of(body, s.think, s.think_budget)
    prompts = prompts_of(body.get("prompt")) if kind == "completion" else None
    p = Parsed(model, s, stream, bool(opts.get("include_usage")), msgs, prompts, tools, n,
               _flag(body, "echo") if kind == "completion" else False, generate, param, ask)
    if p.choices > MAX_CHOICES:
        raise bad("n", f"n x prompts is {p.choices}; one request takes at most {MAX_CHOICES} choices")
    return p

