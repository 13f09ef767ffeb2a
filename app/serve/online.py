"""The online endpoints: /v1/chat/completions, /v1/completions and /v1/models.

Online requests are the latency path: each goes ahead of any batch work
(ServeEngine.submit_online), and past the waiting bound it is refused with 429
at once rather than queued without end. A streaming client that disconnects
has its request cancelled, so its slot is free by the next decode step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from app.batch.types import RequestDone, SlotRequest, SlotResult
from app.engine.events import TextDelta
from app.engine.sampling import GenerationSettings
from app.openai_compat.tools import ToolCalls
from app.serve import protocol
from app.serve.engine_host import Busy, ServeEngine
from app.serve.http import ApiError, error_response, read_json, refused
from app.serve.metrics import ServeMetrics
from app.serve.openai_params import Parsed, parse

log = logging.getLogger("llamadesk.serve")
router = APIRouter()
# Far past any token of a llama.cpp vocabulary (Gemma 3's longest is 48 bytes), so a text refused
# for its size could never have fitted.
MAX_TOKEN_BYTES = 256


class EventPipe:
    """Engine-thread events to the event loop, one wake-up for however many arrived meanwhile:
    a wake-up per token costs the loop more than the token's own work."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.items: list = []
        self.lock = threading.Lock()
        self.ready = asyncio.Event()

    def put(self, ev) -> None:  # the engine thread
        with self.lock:
            self.items.append(ev)
            first = len(self.items) == 1
        if first:
            self.loop.call_soon_threadsafe(self.ready.set)

    async def get(self) -> list:
        await self.ready.wait()
        with self.lock:
            got, self.items = self.items, []
            self.ready.clear()
        return got


def _sse(obj) -> dict:
    return {"data": json.dumps(obj, ensure_ascii=False)}


class OnlineAPI:
    def __init__(self, host: ServeEngine, model_id: str, metrics: ServeMetrics,
                 defaults: GenerationSettings | None = None):
        self.host, self.model_id, self.metrics = host, model_id, metrics
        self.defaults = defaults or GenerationSettings()
        self.created = int(time.time())

    def models(self) -> protocol.ModelList:
        return protocol.model_list(self.model_id, self.created, self.host.slot_ctx)

    def _too_long(self, text_bytes: int, param: str) -> None:
        """Refuse by size, before tokenizing: no token is longer than MAX_TOKEN_BYTES, so a text
        past slot_ctx x that cannot fit, and tokenizing megabytes would hold a thread for seconds."""
        if text_bytes > self.host.slot_ctx * MAX_TOKEN_BYTES:
            raise ApiError(400, f"the {param} is {text_bytes} bytes, more than a slot of "
                                f"{self.host.slot_ctx} tokens can hold", param, "context_length_exceeded")

    async def _request(self, p: Parsed) -> SlotRequest:
        if p.model != self.model_id:
            raise ApiError(404, f"The model {p.model!r} does not exist (this server has {self.model_id!r})",
                           "model", "model_not_found")
        if p.messages is not None:
            self._too_long(sum(len(m.content.encode("utf-8")) for m in p.messages), "messages")
            return SlotRequest("", p.messages, p.settings, reply_as=p.tools)
        data = p.prompt.encode("utf-8")
        self._too_long(len(data), "prompt")
        llm = self.host.model.llm  # the weights' vocabulary: tokenizing is safe off the engine thread
        toks = await asyncio.to_thread(llm.tokenize, data, add_bos=True, special=False)
        if len(toks) >= self.host.slot_ctx:
            raise ApiError(400, f"the prompt is {len(toks)} tokens; a slot holds {self.host.slot_ctx}",
                           "prompt", "context_length_exceeded")
        return SlotRequest("", settings=p.settings, prompt_tokens=toks, verbatim=True)

    def _refuse(self, endpoint: str, e: ApiError) -> JSONResponse:
        self.metrics.requests.labels(endpoint, str(e.status)).inc()
        refused(endpoint, e)
        return error_response(e)

    async def run(self, raw: Request, kind: protocol.Kind):
        endpoint = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
        try:
            p = parse(await read_json(raw), kind, self.defaults)
            req = await self._request(p)
            queue = EventPipe(asyncio.get_running_loop())
            try:
                rid = self.host.submit_online(req, queue.put)
            except Busy:
                raise ApiError(429, "too many requests are waiting for a slot; retry shortly", None,
                               "rate_limit_exceeded", "rate_limit_error", {"Retry-After": "1"}) from None
        except ApiError as e:
            return self._refuse(endpoint, e)
        ident = protocol.completion_id(kind, uuid.uuid4().hex[:24])
        if p.stream:
            return EventSourceResponse(self._stream(kind, ident, rid, queue, p.include_usage, endpoint,
                                                    p.tools), ping=15)
        return await self._whole(kind, ident, rid, queue, endpoint, p.tools)

    async def _events(self, rid: str, queue: EventPipe):
        """The request's events until its RequestDone; cancels it if the consumer leaves."""
        finished = False
        try:
            while True:
                for ev in await queue.get():
                    # Set before the yield: a consumer that stops at RequestDone never resumes us.
                    finished = finished or isinstance(ev, RequestDone)
                    yield ev
                    if finished:
                        return
        finally:
            if not finished:
                self.host.cancel(rid)

    async def _whole(self, kind: protocol.Kind, ident: str, rid: str, queue: EventPipe, endpoint: str,
                     tools: ToolCalls | None):
        async for ev in self._events(rid, queue):
            if isinstance(ev, RequestDone):
                return self._final(kind, ident, ev.result, endpoint, tools)
        raise RuntimeError("unreachable")

    def _final(self, kind: protocol.Kind, ident: str, res: SlotResult, endpoint: str,
               tools: ToolCalls | None):
        st = res.stats
        if st.error is not None:
            code = 400 if st.error_kind in ("context_overflow", "invalid_request") else 500
            kind_of = "invalid_request_error" if code == 400 else "server_error"
            return self._refuse(endpoint, ApiError(code, st.error, None, st.error_kind, kind_of))
        self.metrics.requests.labels(endpoint, "200").inc()
        return JSONResponse(protocol.completion(kind, ident, self.model_id, res.text, st, tools))

    async def _stream(self, kind: protocol.Kind, ident: str, rid: str, queue: EventPipe, include_usage: bool,
                      endpoint: str, tools: ToolCalls | None):
        """Text as it comes; a tool-format reply once it is whole, as OpenAI's tool_calls deltas
        (its JSON is the format's, not the answer: it is read before anything is sent)."""
        model = self.model_id
        if kind == "chat":
            yield _sse(protocol.chunk(kind, ident, model, None, role=True))
        finish = None
        async for ev in self._events(rid, queue):
            if isinstance(ev, TextDelta) and tools is None:
                yield _sse(protocol.chunk(kind, ident, model, ev.text))
            elif isinstance(ev, RequestDone):
                st = ev.result.stats
                if st.error is not None:  # the stream has begun: the error goes in it
                    self.metrics.requests.labels(endpoint, "500").inc()
                    log.warning("%s stream error: %s", endpoint, st.error)
                    yield _sse(protocol.error_body(st.error, "server_error", None, st.error_kind))
                    return
                self.metrics.requests.labels(endpoint, "200").inc()
                if tools is not None:
                    chunks, finish = protocol.tool_reply_chunks(ident, model, ev.result.text, tools, st)
                    for c in chunks:
                        yield _sse(c)
                yield _sse(protocol.finish_chunk(kind, ident, model, st, finish))
                if include_usage:
                    yield _sse(protocol.usage_chunk(kind, ident, model, st))
                yield {"data": "[DONE]"}


async def _online(request: Request) -> OnlineAPI:
    return request.app.state.online


Online = Annotated[OnlineAPI, Depends(_online)]


@router.get("/v1/models")
async def models(api: Online):
    return JSONResponse(api.models())


@router.post("/v1/chat/completions")
async def chat(request: Request, api: Online):
    return await api.run(request, "chat")


@router.post("/v1/completions")
async def completions(request: Request, api: Online):
    return await api.run(request, "completion")
