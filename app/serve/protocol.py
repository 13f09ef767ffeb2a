"""The OpenAI objects this server returns, each a TypedDict with the one function that builds it.

The official `openai` client, LlamaDesk's own remote engine and llama.cpp-aware
clients read these key by key, so each shape is written down once, here, and
every route builds it through these functions instead of by hand.
TypedDicts rather than pydantic models: a stream builds one chunk per token,
and a plain dict costs nothing to make or to json.dumps (a model_dump per
token costs measurable decode throughput).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from app.openai_compat.answer import FINISH, assistant_message
from app.openai_compat.tools import ToolCalls
from app.serve.logprob_shapes import ChatLogprobs, CompletionLogprobs
from app.slots.types import SlotStats

Kind = Literal["chat", "completion"]


class PromptTokensDetails(TypedDict):
    cached_tokens: int


class CompletionTokensDetails(TypedDict):
    reasoning_tokens: int  # of completion_tokens, a thinking model's before its answer


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class Timings(TypedDict):
    """llama-server's `timings`: prefill and decode apart, which `usage` cannot say."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    prompt_per_second: float | None
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float | None
    # Guesses checked and kept, when the server speculates (llama-server's, which it writes once a
    # reply drafted; here every reply of a speculating server has them, 0 while it never guessed).
    draft_n: NotRequired[int]
    draft_n_accepted: NotRequired[int]


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    reasoning_content: NotRequired[str]  # llama-server's (and DeepSeek's): a thinking reply's reasoning
    tool_calls: NotRequired[list[ToolCall]]


class ChatChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: str


class TextChoice(TypedDict):
    """A text_completion's choice, whole or as a stream chunk's (finish_reason None until the last)."""

    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None


class ToolCallDelta(TypedDict, total=False):
    index: int
    id: str
    type: Literal["function"]
    function: dict  # {"name", "arguments"}: the first delta names it, later ones add arguments


class ChatDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    reasoning_content: str
    tool_calls: list[ToolCallDelta]


class ChatChunkChoice(TypedDict):
    index: int
    delta: ChatDelta
    logprobs: NotRequired[ChatLogprobs | None]
    finish_reason: str | None


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    timings: Timings


class TextCompletion(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage
    timings: Timings


class ChatCompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: NotRequired[Usage]  # the extra last chunk of stream_options.include_usage
    timings: NotRequired[Timings]  # the finish chunk and the usage chunk


class TextCompletionChunk(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: NotRequired[Usage]
    timings: NotRequired[Timings]


Chunk = ChatCompletionChunk | TextCompletionChunk


class ModelMeta(TypedDict):
    n_ctx: int  # what llama-server's /v1/models says; the remote engine reads its context here


class Model(TypedDict):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    meta: ModelMeta


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[Model]


class FileObject(TypedDict):
    id: str
    object: Literal["file"]
    purpose: str
    filename: str
    bytes: int
    created_at: int
    status: Literal["processed"]


class FileList(TypedDict):
    object: Literal["list"]
    data: list[FileObject]


class BatchError(TypedDict):
    code: str
    message: str
    line: NotRequired[int | None]


class BatchErrors(TypedDict):
    object: Literal["list"]
    data: list[BatchError]


class RequestCounts(TypedDict):
    total: int
    completed: int
    failed: int


class BatchObject(TypedDict):
    id: str
    object: Literal["batch"]
    endpoint: str
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    in_progress_at: int | None
    expires_at: int
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    metadata: dict | None


class BatchList(TypedDict):
    object: Literal["list"]
    data: list[BatchObject]
    has_more: bool
    first_id: str | None
    last_id: str | None


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorDetail


# -- online -------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """One choice as it ended: its text, its slot's figures, its logprobs when asked (already in
    the endpoint's shape), and whether its prompt's tokens are counted in usage (once per prompt,
    however many choices share it)."""

    text: str
    stats: SlotStats
    logprobs: ChatLogprobs | CompletionLogprobs | None = None
    counts_prompt: bool = True
    reasoning: str = ""  # a thinking reply's, split from `text`


def usage(answers: Sequence[Answer]) -> Usage:
    prompt = sum(a.stats.prompt_tokens or 0 for a in answers if a.counts_prompt)
    cached = sum(a.stats.cached_tokens for a in answers if a.counts_prompt)
    done = sum(a.stats.completion_tokens or 0 for a in answers)
    thought = sum(a.stats.reasoning_tokens or 0 for a in answers)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": thought}}


def timings(st: SlotStats) -> Timings:
    prompt_n = (st.prompt_tokens or 0) - st.cached_tokens
    prompt_ms = ((st.first_token_at or st.finished_at or 0) - (st.slot_start or 0)) * 1000
    predicted_ms = ((st.finished_at or 0) - (st.first_token_at or st.finished_at or 0)) * 1000
    predicted_n = st.completion_tokens or 0
    # llama-server's arithmetic: the rate is predicted_n over predicted_ms, so a client that
    # divides the two gets the rate shown.
    out: Timings = {"cache_n": st.cached_tokens, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
                    "prompt_per_second": prompt_n / prompt_ms * 1000 if prompt_ms > 0 else None,
                    "predicted_n": predicted_n, "predicted_ms": predicted_ms,
                    "predicted_per_second": predicted_n / predicted_ms * 1000 if predicted_ms > 0 else None}
    if st.spec_mode is not None:
        out["draft_n"], out["draft_n_accepted"] = st.draft_tokens, st.draft_accepted
    return out


def completion_id(kind: Kind, hex24: str) -> str:
    return f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{hex24}"


def completion(kind: Kind, ident: str, model: str, answers: Sequence[Answer],
               tools: ToolCalls | None = None) -> ChatCompletion | TextCompletion:
    """The whole answer of a request that did not stream, a choice per answer in index order;
    with `tools`, each read as tool calls. Timings are the first choice's."""
    first = answers[0].stats
    if kind == "chat":
        choices: list[ChatChoice] = []
        for i, a in enumerate(answers):
            message, finish = assistant_message(a.text, tools, a.stats.stop_reason, a.reasoning)
            choices.append({"index": i, "message": message,  # type: ignore[typeddict-item]
                            "logprobs": a.logprobs, "finish_reason": finish})  # type: ignore[typeddict-item]
        chat: ChatCompletion = {
            "id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage(answers), "timings": timings(first)}
        return chat
    plain: TextCompletion = {
        "id": ident, "object": "text_completion", "created": int(time.time()), "model": model,
        "choices": [{"index": i, "text": a.text, "logprobs": a.logprobs,  # type: ignore[typeddict-item]
                     "finish_reason": FINISH.get(a.stats.stop_reason, "stop")}
                    for i, a in enumerate(answers)],
        "usage": usage(answers), "timings": timings(first)}
    return plain


def chunk(kind: Kind, ident: str, model: str, piece: str | None, finish: str | None = None,
          role: bool = False, index: int = 0,
          logprobs: ChatLogprobs | CompletionLogprobs | None = None, reasoning: bool = False) -> Chunk:
    """One stream chunk of choice `index`: the chat's opening role chunk (`role`), a piece of text
    (with its tokens' logprobs when asked; of a thinking reply's reasoning with `reasoning`), or
    the finish."""
    if kind == "chat":
        key = "reasoning_content" if reasoning else "content"
        delta: ChatDelta = ({"role": "assistant", "content": ""} if role
                            else {key: piece} if piece else {})  # type: ignore[misc]
        choice: ChatChunkChoice = {"index": index, "delta": delta, "finish_reason": finish}
        if logprobs is not None:
            choice["logprobs"] = logprobs  # type: ignore[typeddict-item]
        chat: ChatCompletionChunk = {
            "id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [choice]}
        return chat
    plain: TextCompletionChunk = {
        "id": ident, "object": "text_completion", "created": int(time.time()), "model": model,
        "choices": [{"index": index, "text": piece or "", "logprobs": logprobs,  # type: ignore[typeddict-item]
                     "finish_reason": finish}]}
    return plain


def finish_chunk(kind: Kind, ident: str, model: str, st: SlotStats, finish: str | None = None,
                 index: int = 0) -> Chunk:
    last = chunk(kind, ident, model, None, finish or FINISH.get(st.stop_reason, "stop"), index=index)
    last["timings"] = timings(st)
    return last


def tool_reply_chunks(ident: str, model: str, text: str, tools: ToolCalls, st: SlotStats,
                      index: int = 0) -> tuple[list[ChatCompletionChunk], str]:
    """A tool-format reply streamed as OpenAI streams one: the content, or per call a delta naming
    it and one carrying its arguments; and the finish_reason for the last chunk."""
    message, finish = assistant_message(text, tools, st.stop_reason)

    def one(delta: ChatDelta) -> ChatCompletionChunk:
        return {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": index, "delta": delta, "finish_reason": None}]}

    out = [one({"content": message["content"]})] if message.get("content") else []
    for i, call in enumerate(message.get("tool_calls", ())):
        out.append(one({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                        "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        args = call["function"]["arguments"]
        out.append(one({"tool_calls": [{"index": i, "function": {"arguments": args}}]}))
    return out, finish


def usage_chunk(kind: Kind, ident: str, model: str, answers: Sequence[Answer]) -> Chunk:
    """stream_options.include_usage's extra chunk: no choices, the usage."""
    tail = chunk(kind, ident, model, None)
    tail["choices"] = []
    tail["usage"], tail["timings"] = usage(answers), timings(answers[0].stats)
    return tail


def model_object(model_id: str, created: int, n_ctx: int) -> Model:
    return {"id": model_id, "object": "model", "created": created, "owned_by": "llamadesk",
            "meta": {"n_ctx": n_ctx}}


def model_list(model_id: str, created: int, n_ctx: int) -> ModelList:
    return {"object": "list", "data": [model_object(model_id, created, n_ctx)]}


def error_body(message: str, kind: str, param: str | None, code: str | None) -> ErrorBody:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# -- files and batches (from BatchStore's rows) --------------------------------
def file_object(row: dict) -> FileObject:
    return {"id": row["id"], "object": "file", "purpose": row["purpose"], "filename": row["filename"],
            "bytes": row["bytes"], "created_at": row["created_at"], "status": "processed"}


def file_list(rows: list[dict]) -> FileList:
    return {"object": "list", "data": [file_object(r) for r in rows]}


def batch_errors(*errors: BatchError) -> BatchErrors:
    return {"object": "list", "data": list(errors)}


def batch_object(b: dict) -> BatchObject:
    return {"id": b["id"], "object": "batch", "endpoint": b["endpoint"], "errors": b["errors"],
            "input_file_id": b["input_file_id"], "completion_window": b["completion_window"],
            "status": b["status"], "output_file_id": b["output_file_id"], "error_file_id": b["error_file_id"],
            "created_at": b["created_at"], "in_progress_at": b["in_progress_at"],
            "expires_at": b["created_at"] + 24 * 3600, "finalizing_at": b["finalizing_at"],
            "completed_at": b["completed_at"], "failed_at": b["failed_at"], "expired_at": None,
            "cancelling_at": b["cancelling_at"], "cancelled_at": b["cancelled_at"],
            "request_counts": {"total": b["total"], "completed": b["completed"], "failed": b["failed"]},
            "metadata": b["metadata"]}


def batch_list(rows: list[dict]) -> BatchList:
    items = [batch_object(b) for b in rows]
    return {"object": "list", "data": items, "has_more": False,
            "first_id": items[0]["id"] if items else None, "last_id": items[-1]["id"] if items else None}
