"""The HTTP API: OpenAI's online endpoints, /health and /metrics (the Batch API is in batch_api).

Every error is OpenAI's shape with the right status, and one line in the
server's log; never a traceback in a response. Online requests go ahead of
batch work (ServeEngine.submit_online); a streaming client that disconnects
has its request cancelled, so its slot is free by the next decode step.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse

from app.batch.types import RequestDone, SlotRequest, SlotResult
from app.engine.events import TextDelta
from app.engine.sampling import GenerationSettings
from app.serve.engine_host import Busy, ServeEngine
from app.serve.metrics import CONTENT_TYPE, ServeMetrics
from app.serve.openai_params import ApiError, Parsed, parse

log = logging.getLogger("llamadesk.serve")
MAX_BODY = 8 * 1024 * 1024  # a chat request; batch files have their own limit
FINISH = {"stop": "stop", "length": "length", "error": "stop", "cancelled": "stop"}


def usage_of(st) -> dict:
    prompt, done = st.prompt_tokens or 0, st.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done,
            "prompt_tokens_details": {"cached_tokens": st.cached_tokens}}


def timings_of(st) -> dict:
    """llama-server's `timings`, so llama.cpp-aware clients (LlamaDesk's remote engine among
    them) get prefill and decode figures apart."""
    prompt_n = (st.prompt_tokens or 0) - st.cached_tokens
    prompt_ms = ((st.first_token_at or st.finished_at or 0) - (st.slot_start or 0)) * 1000
    predicted_ms = ((st.finished_at or 0) - (st.first_token_at or st.finished_at or 0)) * 1000
    return {"cache_n": st.cached_tokens, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
            "prompt_per_second": prompt_n / prompt_ms * 1000 if prompt_ms > 0 else None,
            "predicted_n": st.completion_tokens or 0, "predicted_ms": predicted_ms,
            "predicted_per_second": st.decode_tok_s}


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


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


class OnlineAPI:
    def __init__(self, host: ServeEngine, model_id: str, metrics: ServeMetrics,
                 defaults: GenerationSettings | None = None):
        self.host, self.model_id, self.metrics = host, model_id, metrics
        self.defaults = defaults or GenerationSettings()
        self.created = int(time.time())

    def _request(self, p: Parsed) -> SlotRequest:
        if p.model != self.model_id:
            raise ApiError(404, f"The model {p.model!r} does not exist (this server has {self.model_id!r})",
                           "model", "model_not_found")
        if p.messages is not None:
            return SlotRequest("", p.messages, p.settings)
        toks = self.host.model.llm.tokenize(p.prompt.encode("utf-8"), add_bos=True, special=False)
        if len(toks) >= self.host.slot_ctx:
            raise ApiError(400, f"the prompt is {len(toks)} tokens; a slot holds {self.host.slot_ctx}",
                           "prompt", "context_length_exceeded")
        return SlotRequest("", settings=p.settings, prompt_tokens=toks, verbatim=True)

    async def run(self, raw: Request, kind: str):
        endpoint = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
        try:
            p = parse(await read_json(raw), kind, self.defaults)
            req = self._request(p)
            queue = EventPipe(asyncio.get_running_loop())
            try:
                rid = self.host.submit_online(req, queue.put)
            except Busy:
                raise ApiError(429, "too many requests are waiting for a slot; retry shortly", None,
                               "rate_limit_exceeded", "rate_limit_error", {"Retry-After": "1"}) from None
        except ApiError as e:
            self.metrics.requests.labels(endpoint, str(e.status)).inc()
            log.warning("%s %s: %s %s", endpoint, e.status, e.param or "-", e.message)
            return error_response(e)
        ident = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        if p.stream:
            return EventSourceResponse(self._stream(kind, ident, rid, queue, p.include_usage, endpoint),
                                       ping=15)
        return await self._whole(kind, ident, rid, queue, endpoint)

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

    async def _whole(self, kind: str, ident: str, rid: str, queue, endpoint: str):
        async for ev in self._events(rid, queue):
            if isinstance(ev, RequestDone):
                return self._final(kind, ident, ev.result, endpoint)
        raise RuntimeError("unreachable")

    def _final(self, kind: str, ident: str, res: SlotResult, endpoint: str):
        st = res.stats
        if st.error is not None:
            code = 400 if st.error_kind in ("context_overflow", "invalid_request") else 500
            self.metrics.requests.labels(endpoint, str(code)).inc()
            log.warning("%s %s: %s", endpoint, code, st.error)
            return error_response(ApiError(code, st.error, None, st.error_kind,
                                           "invalid_request_error" if code == 400 else "server_error"))
        self.metrics.requests.labels(endpoint, "200").inc()
        choice = ({"index": 0, "message": {"role": "assistant", "content": res.text}} if kind == "chat"
                  else {"index": 0, "text": res.text, "logprobs": None})
        choice["finish_reason"] = FINISH.get(st.stop_reason, "stop")
        obj = "chat.completion" if kind == "chat" else "text_completion"
        return JSONResponse({"id": ident, "object": obj,
                             "created": int(time.time()), "model": self.model_id, "choices": [choice],
                             "usage": usage_of(st), "timings": timings_of(st)})

    def _chunk(self, kind: str, ident: str, piece: str | None, finish: str | None = None, role=False) -> dict:
        if kind == "chat":
            delta = {"role": "assistant", "content": ""} if role else ({"content": piece} if piece else {})
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": finish}
        return {"id": ident, "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
                "created": int(time.time()), "model": self.model_id, "choices": [choice]}

    async def _stream(self, kind: str, ident: str, rid: str, queue, include_usage: bool, endpoint: str):
        if kind == "chat":
            yield {"data": json.dumps(self._chunk(kind, ident, None, role=True))}
        async for ev in self._events(rid, queue):
            if isinstance(ev, TextDelta):
                yield {"data": json.dumps(self._chunk(kind, ident, ev.text), ensure_ascii=False)}
            elif isinstance(ev, RequestDone):
                st = ev.result.stats
                if st.error is not None:  # the stream has begun: the error goes in it
                    self.metrics.requests.labels(endpoint, "500").inc()
                    log.warning("%s stream error: %s", endpoint, st.error)
                    yield {"data": json.dumps({"error": {"message": st.error, "type": "server_error",
                                                         "param": None, "code": st.error_kind}})}
                    return
                self.metrics.requests.labels(endpoint, "200").inc()
                last = self._chunk(kind, ident, None, FINISH.get(st.stop_reason, "stop"))
                last["timings"] = timings_of(st)
                yield {"data": json.dumps(last)}
                if include_usage:
                    tail = {**self._chunk(kind, ident, None), "choices": [], "usage": usage_of(st),
                            "timings": timings_of(st)}
                    yield {"data": json.dumps(tail)}
                yield {"data": "[DONE]"}


async def read_json(raw: Request, limit: int = MAX_BODY):
    """The body as JSON: 413 past `limit` (counted as it arrives, whatever Content-Length says)."""
    declared = raw.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is over {limit} bytes", None, "request_too_large")
    data = bytearray()
    async for chunk in raw.stream():
        data += chunk
        if len(data) > limit:
            raise ApiError(413, f"the request body is over {limit} bytes", None, "request_too_large")
    try:
        return json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the request body is not valid JSON ({e})", None, "invalid_json") from None


class KeyCheck:
    """`Authorization: Bearer KEY` on every /v1/ route, compared in constant time. A plain ASGI
    middleware: Starlette's BaseHTTPMiddleware would copy every streamed token through a
    memory channel of its own."""

    def __init__(self, app, key: str):
        self.app, self.want = app, f"Bearer {key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.want):
                resp = error_response(ApiError(401, "Incorrect API key provided", None, "invalid_api_key",
                                               "authentication_error"))
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(host: ServeEngine, model_id: str, api_key: str | None = None,
               defaults: GenerationSettings | None = None, data_dir=None) -> FastAPI:
    """The whole server. `data_dir` (a Path) enables the Batch API, its files and batches kept there."""
    app = FastAPI(title="LlamaDesk", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = ServeMetrics(host)
    host.on_result = metrics.observe
    online = OnlineAPI(host, model_id, metrics, defaults)
    app.state.metrics, app.state.online = metrics, online

    if api_key:
        app.add_middleware(KeyCheck, key=api_key)

    @app.exception_handler(Exception)
    async def crashed(request: Request, e: Exception):  # a bug answers 500 in OpenAI's shape
        log.error("%s %s crashed: %s: %s", request.method, request.url.path, type(e).__name__, e)
        return error_response(ApiError(500, f"internal error: {type(e).__name__}", None, "internal_error",
                                       "server_error"))

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, e: ApiError):
        return error_response(e)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_id, "object": "model", "created": online.created,
                                            "owned_by": "llamadesk", "meta": {"n_ctx": host.slot_ctx}}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await online.run(request, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await online.run(request, "completion")

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    if data_dir is not None:
        from app.serve.batch_api import add_batch_api

        add_batch_api(app, host, model_id, data_dir, metrics, defaults or GenerationSettings())
    return app
