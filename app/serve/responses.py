"""/v1/responses, OpenAI's current API, on the same engine and request checks as chat completions.

A Responses request is turned into the chat request it means (instructions as
the system message, input items as turns, function_call items and their
outputs as tool calls and results, text.format as response_format, the
Responses shape of tools as chat tools) and checked by app.openai_compat like
any other, so structure and tools behave exactly as they do on
/v1/chat/completions. `previous_response_id` continues a stored response: the
server keeps the conversation of its recent responses (STORED of them, in
memory; a server restart forgets them, and a lookup of a forgotten one is a
404 that says so). Streaming follows OpenAI's event sequence, each event with
its `type` and `sequence_number`.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from contextlib import aclosing
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from app.openai_compat.answer import assistant_message
from app.openai_compat.tools import ToolCalls
from app.serve.disconnect import ClientGone, while_connected
from app.serve.fan import Fan
from app.serve.http_rules import ApiError, bad, error_response, read_json, refused
from app.serve.online import OnlineAPI
from app.serve.openai_params import Parsed, parse
from app.serve.request_log import served
from app.serve.responses_stream import ItemStream, new_id
from app.slots.types import RequestDone, SlotResult

router = APIRouter()
STORED = 1000
# llama-server's own chat fields, which its /v1/responses passes on to the chat request it makes.
PASSED = ("chat_template_kwargs", "reasoning_format", "reasoning_budget_tokens", "thinking_budget_tokens",
          "grammar")
ALLOWED = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream",
           "previous_response_id", "text", "tools", "tool_choice", "parallel_tool_calls", "store", "metadata",
           "user", "truncation", "seed", "reasoning", *PASSED}
# The summaries OpenAI writes of its models' reasoning: none is written here, which "auto" allows.
SUMMARIES = (None, "auto")


def _text_of(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad("input", f"{where}.content must be text or a list of content parts")
    out = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text"):
            raise bad("input", f"{where}.content[{k}] is {kind or 'not a content part'}: this model takes "
                               "text only")
        if not isinstance(part.get("text"), str):
            raise bad("input", f"{where}.content[{k}].text must be text")
        out.append(part["text"])
    return "".join(out)


def chat_messages(items, where: str = "input", called: set | None = None) -> list[dict]:
    """Responses input items as chat messages. `called`: the call ids the earlier turns made, which
    a function_call_output may answer besides this input's own function_call items."""
    called = set() if called is None else set(called)
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise bad("input", "input must be text or a non-empty list of input items")
    out: list[dict] = []
    for i, it in enumerate(items):
        at = f"{where}[{i}]"
        kind = it.get("type", "message") if isinstance(it, dict) else None
        if kind == "message":
            out.append({"role": it.get("role"), "content": _text_of(it.get("content"), at)})
        elif kind == "function_call":
            called.add(it.get("call_id"))
            call = {"id": it.get("call_id"), "type": "function",
                    "function": {"name": it.get("name"), "arguments": it.get("arguments", "{}")}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls"):
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "reasoning":
            continue  # an earlier turn's reasoning, sent back: thinking templates leave it out anyway
        elif kind == "function_call_output":
            cid = it.get("call_id")
            if not isinstance(cid, str) or not cid:
                raise bad("input", f"{at}.call_id must name the function_call this output answers")
            if cid not in called:
                raise bad("input", f"{at}.call_id {cid!r} matches no function_call of this input or of "
                                   "the previous response")
            out.append({"role": "tool", "tool_call_id": it.get("call_id"), "content": it.get("output")})
        else:
            raise bad("input", f"{at} is {kind!r}: input items are messages, function_call, "
                               "function_call_output and reasoning")
    return out


def chat_body(body: dict, earlier: list[dict]) -> dict:
    """The chat completions request a Responses request means."""
    for k in body:
        if k not in ALLOWED:
            raise ApiError(400, f"Unrecognized request argument supplied: {k}", k, "unknown_parameter")
    if body.get("truncation") not in (None, "disabled"):
        raise bad("truncation", "truncation must be \"disabled\": LlamaDesk never drops input silently")
    made = {c.get("id") for m in earlier for c in m.get("tool_calls") or () if isinstance(c, dict)}
    msgs = [*earlier, *chat_messages(body.get("input"), called=made)]
    if isinstance(body.get("instructions"), str) and body["instructions"].strip():
        msgs = [{"role": "system", "content": body["instructions"]}, *msgs]
    chat: dict = {"model": body.get("model"), "messages": msgs}
    chat.update({k: body[k] for k in PASSED if k in body})
    for a, b in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"),
                 ("seed", "seed"), ("parallel_tool_calls", "parallel_tool_calls")):
        if body.get(a) is not None:
            chat[b] = body[a]
    _reasoning(body.get("reasoning"), chat)
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if fmt is not None:
        if not isinstance(fmt, dict):
            raise bad("text", "text.format must be an object")
        if fmt.get("type") == "json_schema":
            chat["response_format"] = {"type": "json_schema", "json_schema": {
                "name": fmt.get("name", "reply"), "schema": fmt.get("schema"), "strict": fmt.get("strict")}}
        else:
            chat["response_format"] = {"type": fmt.get("type")}
    tools = body.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise bad("tools", "tools must be a list")
        chat["tools"] = [{"type": "function", "function": {k: t.get(k) for k in ("name", "description",
                                                                                    "parameters")
                                                           if t.get(k) is not None}}
                         if isinstance(t, dict) and t.get("type") == "function" else t for t in tools]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        chat["tool_choice"] = choice
    return chat


def _reasoning(r, chat: dict) -> None:
    """OpenAI's `reasoning` object: its effort is the chat request's reasoning_effort."""
    if r is None:
        return
    if not isinstance(r, dict) or set(r) - {"effort", "summary", "generate_summary"}:
        raise bad("reasoning", 'reasoning must be {"effort": ..., "summary": ...}')
    summary = r.get("summary", r.get("generate_summary"))
    if summary not in SUMMARIES:
        raise bad("reasoning", f"reasoning.summary {summary!r} is not written by this server (\"auto\" "
                               "allows none)")
    if r.get("effort") is not None:
        chat["reasoning_effort"] = r["effort"]


class ResponsesAPI:
    def __init__(self, online: OnlineAPI):
        self.online = online
        self._stored: OrderedDict[str, list[dict]] = OrderedDict()  # id -> the conversation so far

    def _earlier(self, rid) -> list[dict]:
        if rid is None:
            return []
        if not isinstance(rid, str) or rid not in self._stored:
            raise ApiError(404, f"No response {rid!r} is stored here (the server keeps its last {STORED}, "
                                "until it restarts)", "previous_response_id", "not_found")
        return list(self._stored[rid])

    def _keep(self, rid: str, messages: list[dict], message: dict) -> None:
        self._stored[rid] = [*messages, {k: v for k, v in message.items() if v is not None or k == "content"}]
        while len(self._stored) > STORED:
            self._stored.popitem(last=False)

    async def create(self, request: Request):
        try:
            body = await read_json(request)
            if not isinstance(body, dict):
                raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
            chat = chat_body(body, self._earlier(body.get("previous_response_id")))
            p = parse(chat, "chat", self.online.defaults)
            if p.n != 1:
                raise bad("n", "a response has one output")
            fan, _ = await self.online.start(p)
        except ApiError as e:
            refused("/v1/responses", e)
            return error_response(e)
        resp_id = f"resp_{uuid.uuid4().hex[:24]}"
        shell = _shell(resp_id, self.online.model_id, body, p)
        if body.get("stream"):
            return EventSourceResponse(self._stream(shell, fan, p, chat, body), ping=15)
        try:
            res = await while_connected(request, self._result(fan))
        except ClientGone:
            return self.online.gone("/v1/responses")
        return self._final(shell, res, p, chat, body)

    async def _result(self, fan: Fan) -> SlotResult:
        async with aclosing(self.online.events(fan)) as events:
            async for _, ev in events:
                if isinstance(ev, RequestDone):
                    return ev.result
        raise RuntimeError("unreachable")

    def _final(self, shell: dict, res: SlotResult, p: Parsed, chat: dict, body: dict):
        st = res.stats
        if st.error is not None:
            code = 400 if st.error_kind in ("context_overflow", "invalid_request") else 500
            served("POST", "/v1/responses", code, self.online.model_id, [st], st.error)
            return error_response(ApiError(code, st.error, None, st.error_kind,
                                           "invalid_request_error" if code == 400 else "server_error"))
        out, message = _finished(shell, res, p.tools)
        served("POST", "/v1/responses", 200, self.online.model_id, [st])
        if body.get("store", True):
            self._keep(shell["id"], chat["messages"], message)
        return JSONResponse(out)

    async def _stream(self, shell: dict, fan: Fan, p: Parsed, chat: dict, body: dict):
        items = ItemStream(p.tools is None)
        yield items.event("response.created", response=shell)
        yield items.event("response.in_progress", response=shell)
        async for _, ev in self.online.events(fan):
            if isinstance(ev, RequestDone):
                res = ev.result
                served("POST", "/v1/responses", 500 if res.stats.error else 200, self.online.model_id,
                       [res.stats], res.stats.error)
                if res.stats.error is not None:
                    yield items.event("error", code=res.stats.error_kind, message=res.stats.error, param=None)
                    return
                done, message = _finished(shell, res, p.tools, items.message_id, items.reasoning_id)
                for e in items.finish(done["output"]):
                    yield e
                if body.get("store", True):
                    self._keep(shell["id"], chat["messages"], message)
                yield items.event("response.completed" if done["status"] == "completed"
                                  else "response.incomplete", response=done)
                return
            for e in items.delta(ev):
                yield e


def _shell(resp_id: str, model: str, body: dict, p: Parsed) -> dict:
    """The response object as it stands before any output."""
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    return {"id": resp_id, "object": "response", "created_at": int(time.time()), "status": "in_progress",
            "model": model, "output": [], "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "previous_response_id": body.get("previous_response_id"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "temperature": p.settings.temperature, "top_p": p.settings.top_p,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "text": {"format": fmt or {"type": "text"}}, "truncation": "disabled", "usage": None}


def _finished(shell: dict, res: SlotResult, tools: ToolCalls | None,
              item_id: str | None = None, reasoning_id: str | None = None) -> tuple[dict, dict]:
    """The finished response, and the assistant message to store for a previous_response_id: the
    same message, so a function_call_output's call_id is one the stored turn made. A thinking
    reply's reasoning is a reasoning item ahead of the message, as llama-server and OpenAI send it."""
    st = res.stats
    message, finish = assistant_message(res.text, tools, st.stop_reason, res.reasoning)
    output: list[dict] = []
    if res.reasoning:
        output.append({"type": "reasoning", "id": reasoning_id or new_id("rs"), "summary": [],
                       "content": [{"type": "reasoning_text", "text": res.reasoning}], "status": "completed"})
    if message.get("content") is not None:
        output.append({"type": "message", "id": item_id or f"msg_{uuid.uuid4().hex[:24]}",
                       "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for call in message.get("tool_calls", ()):
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                       "status": "completed"})
    prompt, done = st.prompt_tokens or 0, st.completion_tokens or 0
    cut = finish == "length"
    return {**shell, "status": "incomplete" if cut else "completed", "output": output,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": st.cached_tokens},
                      "output_tokens": done,
                      "output_tokens_details": {"reasoning_tokens": st.reasoning_tokens or 0},
                      "total_tokens": prompt + done}}, message


async def _api(request: Request) -> ResponsesAPI:
    return request.app.state.responses


Api = Annotated[ResponsesAPI, Depends(_api)]


@router.post("/v1/responses")
async def create(request: Request, api: Api):
    return await api.create(request)
