"""The whole server, put together: which routers, which state, which middleware.

Each resource has its router (online, files, batches) and shares the HTTP
rules of app.serve.http_rules; this module is the only one that knows them all, so
none of them imports another, and the Batch API is there only when the
server has a folder to keep its files in.

The middleware, outermost first: the request log (app.serve.request_log), the
browser guard (Host, Origin, CORS: app.serve.guard), then the key. Its defaults are the window's own server's:
bound to 127.0.0.1, no name or origin allowed beyond it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from app.engine.sampling import GenerationSettings
from app.serve import batches, embeddings, files, online, responses
from app.serve.batch_api_runs import BatchRuns
from app.serve.batch_api_store import BatchStore, StoreBug, StoreError
from app.serve.batch_hosts import OneHost
from app.serve.engine_host import ServeEngine
from app.serve.guard import Guard, HostRule
from app.serve.http_rules import KeyCheck, add_error_handlers
from app.serve.metrics import CONTENT_TYPE, ServeMetrics
from app.serve.request_log import RequestLog
from app.serve.side_engine import SideEngine

# The routes that write their own line, with the tokens they read and wrote.
SELF_LOGGED = frozenset(("POST", path) for path in
                        ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"))


def front_door(app: FastAPI, api_key: str | None, bind: str, allow_hosts: Iterable[str],
               allow_origins: Iterable[str], stalled: Callable[[], str | None] = lambda: None) -> None:
    """What a server's front door has, one or several models behind it: the key, the browser
    guard, OpenAI's error shape for every refusal, and /health, which answers 503 with the
    reason while `stalled()` gives one (an engine that has stopped stepping), so a supervisor
    or load balancer sees a wedged server as down instead of "ok"."""
    if api_key:
        app.add_middleware(KeyCheck, key=api_key)
    app.add_middleware(Guard, hosts=HostRule(bind, allow_hosts), origins=allow_origins)
    app.add_middleware(RequestLog, self_logged=SELF_LOGGED, quiet=frozenset(("/health", "/metrics")))
    add_error_handlers(app, storage=(StoreError,), bugs=(StoreBug,))

    @app.get("/health")
    async def health():
        why = stalled()
        if why is not None:
            return JSONResponse({"status": "error", "error": why}, status_code=503)
        return JSONResponse({"status": "ok"})


def create_app(host: ServeEngine, model_id: str, api_key: str | None = None,
               defaults: GenerationSettings | None = None, data_dir=None, *, store: BatchStore | None = None,
               bind: str = "127.0.0.1", allow_hosts: Iterable[str] = (),
               allow_origins: Iterable[str] = (), guarded: bool = True,
               reasoning_format: str = "auto") -> FastAPI:
    """The whole server. The Batch API is there with `store`, or with `data_dir` (a Path) to open
    one in (StoreError if it cannot be used). `bind`: the address served, for the Host check.
    `guarded` False: no browser guard and no key, for a model behind a multi-model server
    (app.serve.models_api), whose front door has both; it closes `app.state.side` itself.
    `reasoning_format`: a thinking model's replies, split ("auto", "deepseek") or whole ("none"),
    when a request does not say."""
    side = SideEngine(host.model, host.slot_ctx)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        side.close()  # its contexts go before the model they were made on

    app = FastAPI(title="LlamaDesk", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    metrics = ServeMetrics(host)
    host.on_result = metrics.observe
    app.state.metrics, app.state.host, app.state.side = metrics, host, side
    app.state.online = online.OnlineAPI(host, model_id, metrics, defaults, side, reasoning_format)
    app.state.embeddings = embeddings.EmbeddingsAPI(side, model_id, host.slot_ctx)
    app.state.responses = responses.ResponsesAPI(app.state.online)
    if guarded:
        front_door(app, api_key, bind, allow_hosts, allow_origins, host.stalled)
    else:
        add_error_handlers(app, storage=(StoreError,), bugs=(StoreBug,))

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    app.include_router(online.router)
    app.include_router(embeddings.router)
    app.include_router(responses.router)
    if store is None and data_dir is not None:
        store = BatchStore(Path(data_dir))
    if store is not None:
        runs = BatchRuns(store, OneHost(host, model_id, side), defaults or GenerationSettings(),
                         reasoning_format != "none")
        runs.resume()
        metrics.batch_counts = runs.counts
        app.state.batch_store, app.state.batches = store, batches.Batches(store, runs)
        app.include_router(files.router)
        app.include_router(batches.router)
    return app
