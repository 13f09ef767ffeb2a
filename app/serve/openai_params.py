"""An OpenAI request body, checked field by field: honoured, or a 400 naming the parameter.

Never silently ignored: a client that asks for n=3, logprobs or tools and
gets one plain answer has been lied to. The sampling fields reuse the batch
file's checks (app.batchfile.fields), so a value refused in a batch file is
refused here with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.batchfile.fields import is_text, messages, settings_from_body
from app.engine.prompt import PromptMessage
from app.engine.sampling import GenerationSettings
from app.serve.http import ApiError, bad

# Fields that carry no behaviour we could fail to honour.
HARMLESS = {"user", "metadata", "store", "service_tier", "parallel_tool_calls"}
COMMON = {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
          "repeat_penalty", "seed", "stop", "stream", "stream_options", "n", "logprobs", "top_logprobs",
          "presence_penalty", "frequency_penalty", "logit_bias", "ignore_eos"}
CHAT = COMMON | {"messages", "response_format", "tools", "tool_choice", "functions", "function_call",
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


def _unsupported(body: dict, allowed: set[str]) -> None:
    for k in body:
        if k not in allowed and k not in HARMLESS:
            raise ApiError(400, f"Unrecognized request argument supplied: {k}", k, "unknown_parameter")
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
    for k in ("tools", "functions", "tool_choice", "function_call", "audio", "prediction",
              "web_search_options", "reasoning_effort"):
        if body.get(k):
            raise bad(k, f"{k} is not supported by this server")
    if body.get("modalities") not in (None, ["text"]):
        raise bad("modalities", "only text output is supported")
    rf = body.get("response_format")
    if rf is not None and rf != {"type": "text"}:
        raise bad("response_format", "only response_format {\"type\": \"text\"} is supported")
    if body.get("echo") or (body.get("best_of") not in (None, 1)) or body.get("suffix"):
        k = "echo" if body.get("echo") else "best_of" if body.get("best_of") not in (None, 1) else "suffix"
        raise bad(k, f"{k} is not supported by this server")


def _param_of(message: str) -> str:
    first = message.split()[0] if message else ""
    return first.removeprefix("body.").split("[")[0].split(".")[0]


def parse(body, kind: str, defaults: GenerationSettings) -> Parsed:
    """`kind` "chat" or "completion"; raises ApiError."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
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
    prompt = None
    if kind == "completion":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt or not is_text(prompt):
            raise bad("prompt", "prompt must be a non-empty string (one prompt per request)")
    return Parsed(model, s, stream, bool(opts.get("include_usage")), msgs, prompt)
