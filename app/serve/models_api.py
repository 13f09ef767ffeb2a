"""A server with several models: one front door, each request routed by its `model`.

`llamadesk serve --model A --model B` (or `--models-dir DIR`) starts this
instead of the single-model server. Every model, once loaded, is a whole
single-model server of its own (app.serve.api's create_app: its engine, its
side engine, its metrics), without the browser guard and the key, which the
front door applies once. The front door reads a request's body, finds the
model it names (in the body, as llama-server's router does for POST; in the
`model` query parameter for GET /tokenizer_info), holds that model in the
pool (app.serve.pool: loaded on demand, least recently used unloaded first),
and hands the request on with its body replayed; the model's own app answers
it, streaming included, and the model is released when the answer is sent.
A switch between loaded models costs one body parse and a dictionary lookup.

The front door answers for the whole server:

- /v1/models and /v1/models/{id}: every model served, loaded or not, each
  with its `status` as llama-server's router gives it;
- llama-server's router endpoints: GET /models (`status.value` loaded,
  loading, unloaded; `failed` with the reason of a load that failed, and
  each --models-dir file that cannot be served at all, with why: it is no
  model a client can pick, so /v1/models leaves it out),
  POST /models/load and /models/unload (`{"model": ...}` -> `{"success": true}`);
- /metrics: the loads (app.serve.metrics_models) and each loaded model's own;
- the Batch API, on one store: a batch runs on the model its lines name
  (held loaded while it runs); a file naming a model not served, or several
  models, is refused when the batch is created.

A request for a model still loading waits up to `load_wait_s`, then 503; one
for a model that cannot fit in memory is 503 with the memory it needs; a
model not served is 404 naming it and the ones that are.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from app.engine.errors import ModelFileError
from app.engine.gguf import GGUFHeader, read_header
from app.engine.loader import LoadedModel, LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.hub.fit import predict
from app.serve import batches, files, protocol
from app.serve.api import create_app, front_door
from app.serve.batch_api_runs import BatchRuns
from app.serve.batch_api_store import BatchStore
from app.serve.engine_host import ServeEngine
from app.serve.http_rules import ApiError, read_json, read_json_bytes
from app.serve.metrics import CONTENT_TYPE, ServeMetrics
from app.serve.metrics_models import PoolMetrics
from app.serve.pool import AllBusy, ModelPool, ModelSpec, NotServed, PoolError, PoolEvents
from app.serve.side_engine import SideEngine
from app.slots.engine import ONLINE_RESERVE

LOAD_WAIT_S = 60.0  # a request for a model still loading waits this long, then 503
BUSY_POLL_S = 0.02  # while every model that would make room is answering a request
BATCH_HOLD_S = 600.0  # a batch waits this long for its model to load or for room to load it
ROUTED_POST = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/tokenize",
               "/detokenize")
# What of a request's ASGI scope reaches the model's app: the request itself, not the front
# door's routing state.
_SCOPE_KEYS = ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path", "root_path",
               "query_string", "headers", "client", "server", "extensions", "state")


@dataclass
class ServedModel:
    """A loaded model: its weights, its engine and its own app; closed in that order reversed."""

    model: LoadedModel
    host: ServeEngine
    app: FastAPI
    load_s: float = 0.0

    def close(self) -> None:
        self.app.state.side.close()  # its contexts before the engine's, before the weights
        self.host.close()
        self.model.close()


@dataclass
class ServeSettings:
    """How every model of the server is served: the same load options, slots and defaults."""

    opts: LoadOptions
    n_slots: int
    slot_ctx: int
    max_waiting: int = 64
    defaults: GenerationSettings | None = None
    reasoning_format: str = "auto"  # --reasoning-format

    def spec(self, path: Path) -> ModelSpec:
        """A model file as the pool knows it; ModelFileError if its header cannot be read."""
        h = read_header(path)
        cells = (self.n_slots + ONLINE_RESERVE) * self.slot_ctx + self.opts.n_ctx
        need = predict(h, cells, kv_type=self.opts.kv_type, flash_attn=self.opts.flash_attn).ram_needed
        return ModelSpec(path.name, path, need, h.size, h, _stamp(path))

    def found(self, path: Path) -> ModelSpec:
        """A file a folder holds, as the pool knows it: one that cannot be read as a model is
        kept with the reason, so it is listed as unusable while the folder's others are served."""
        try:
            return self.spec(path)
        except ModelFileError as e:
            st = _stamp(path)
            return ModelSpec(path.name, path, 0, st[0] if st else 0, stamp=st, error=e.reason)

    def build(self, spec: ModelSpec) -> ServedModel:
        t0 = time.perf_counter()
        # The header read at startup, unless the file changed since: reading a 262k-token
        # vocabulary's header again would be a third of a cold load.
        header = spec.header if spec.stamp == _stamp(spec.path) else None
        model = load_model(spec.path, self.opts, cast(GGUFHeader | None, header))
        try:
            host = ServeEngine(model, self.n_slots, self.slot_ctx, self.max_waiting)
        except BaseException:
            model.close()
            raise
        app = create_app(host, spec.id, defaults=self.defaults, guarded=False,
                         reasoning_format=self.reasoning_format)
        return ServedModel(model, host, app, time.perf_counter() - t0)


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return st.st_size, st.st_mtime_ns


def _api_error(e: PoolError) -> ApiError:
    kind = "invalid_request_error" if e.status < 500 else "server_error"
    return ApiError(e.status, str(e), "model", e.code, kind, {"Retry-After": "1"} if e.retry else None)


class Forwarded(Response):
    """The answer of the model's own app to a request the front door has read: its body is
    replayed to the app, the rest of the connection (a client leaving) passed through."""

    def __init__(self, app: FastAPI, body: bytes, done: Callable[[], None]):
        super().__init__()
        self.app, self.body, self.done = app, body, done

    async def __call__(self, scope, receive, send) -> None:
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": self.body, "more_body": False}
            return await receive()

        try:
            await self.app({k: scope[k] for k in _SCOPE_KEYS if k in scope}, replay, send)
        finally:
            self.done()


class ModelsFront:
    def __init__(self, pool: ModelPool, slot_ctx: int, load_wait_s: float = LOAD_WAIT_S,
                 autoload: bool = True):
        self.pool, self.slot_ctx, self.load_wait_s = pool, slot_ctx, load_wait_s
        self.autoload = autoload  # False: a request loads nothing; POST /models/load does
        self.created = int(time.time())

    def autoloads(self, request: Request) -> bool:
        """llama-server's per-request `?autoload=true|false`, else the server's setting."""
        asked = request.query_params.get("autoload")
        if asked is None:
            return self.autoload
        if asked not in ("true", "false", "1", "0"):
            raise ApiError(400, f"autoload must be true or false, got {asked!r}", "autoload", "invalid_value")
        return asked in ("true", "1")

    async def take(self, name, autoload: bool = True) -> ServedModel:
        """The model `name`, held: loaded first if it is not (waiting up to load_wait_s), or
        with `autoload` False, 503 unless it is loaded or loading already."""
        deadline = time.monotonic() + self.load_wait_s
        try:
            entry = self.pool.find(name)
        except PoolError as e:
            raise _api_error(e) from None
        if not autoload and entry.status == "unloaded":
            raise ApiError(503, f"the model {entry.spec.id!r} is not loaded, and requests do not load "
                                "models here: load it with POST /models/load", "model", "model_not_loaded",
                           "server_error")
        while True:
            try:
                got = self.pool.try_acquire(name)
            except AllBusy as e:  # the models that would make room end their requests soon, often
                if time.monotonic() >= deadline:
                    raise _api_error(e) from None
                await asyncio.sleep(BUSY_POLL_S)
                continue
            except PoolError as e:
                raise _api_error(e) from None
            if not isinstance(got, tuple):
                return cast(ServedModel, got)
            fut, mine = got
            try:
                res = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)),
                                             max(deadline - time.monotonic(), 0.001))
            except PoolError as e:
                raise _api_error(e) from None
            except (TimeoutError, asyncio.CancelledError) as e:
                if mine:  # the load goes on; the hold it brings is let go when it ends
                    fut.add_done_callback(self.pool.release_when_loaded(name))
                if isinstance(e, asyncio.CancelledError):
                    raise
                mid = self.pool.find(name).spec.id
                raise ApiError(503, f"the model {mid!r} is still loading after {self.load_wait_s:g} s; "
                                    "retry shortly", "model", "model_loading", "server_error",
                               {"Retry-After": "1"}) from None
            if mine:
                return cast(ServedModel, res)

    async def forward(self, request: Request, name, body: bytes) -> Forwarded:
        served = await self.take(name, self.autoloads(request))
        mid = self.pool.find(name).spec.id
        return Forwarded(served.app, body, lambda: self.pool.release(mid))

    # -- listings ------------------------------------------------------------------
    def _object(self, entry, status: str) -> dict:
        obj: dict = dict(protocol.model_object(entry.spec.id, self.created, self.slot_ctx))
        obj["meta"] = {**obj["meta"], "size": entry.spec.size,
                       "memory_needed": entry.spec.need if entry.spec.error is None else None,
                       "load_s": entry.load_s}
        state: dict = {"value": status}
        if status == "unloaded" and entry.failed:
            state.update(failed=True, error=entry.failed)
        obj["status"] = state
        obj["path"] = str(entry.spec.path)
        return obj

    def listing(self, unusable: bool = False) -> dict:
        """The models served; with `unusable`, the files that cannot be, too (GET /models)."""
        return {"object": "list", "data": [self._object(e, "unloaded" if s == "unloading" else s)
                                           for e, s in self.pool.statuses()
                                           if unusable or e.spec.error is None]}

    def one(self, name) -> dict:
        try:
            e = self.pool.find(name)
        except NotServed as err:
            raise _api_error(err) from None
        return self._object(e, "unloaded" if e.status == "unloading" else e.status)

    def loaded_metrics(self) -> dict[str, ServeMetrics]:
        return {e.spec.id: cast(ServedModel, e.served).app.state.metrics
                for e, s in self.pool.statuses() if s == "loaded" and e.served is not None}


def _model_of(body) -> str:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
    return body.get("model")


def _named(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, body.model) of each line of a batch file that names one."""
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            body = obj.get("body") if isinstance(obj, dict) else None
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                yield n, body["model"]


@dataclass
class PoolHosts:
    """The Batch API's engines on a multi-model server: the model a batch's lines name."""

    pool: ModelPool
    timeout: float = BATCH_HOLD_S
    held: dict = field(default_factory=dict)

    def batch_model(self, path: str | Path) -> str:
        for _, name in _named(path):
            return name
        return self.pool.ids[0]  # no line names one: each line's error says so

    def check(self, path: str | Path) -> None:
        first: dict[str, int] = {}
        for n, name in _named(path):
            first.setdefault(name, n)
        for name, n in first.items():
            try:
                self.pool.find(name)
            except NotServed as e:
                raise ValueError(f"line {n}: {e}") from None
        if len(first) > 1:
            named = ", ".join(f"{m!r} (line {n})" for m, n in first.items())
            raise ValueError(f"a batch runs on one model, and this file names {len(first)}: {named}; "
                             "make one batch per model")

    def hold(self, model: str) -> ServeEngine:
        return cast(ServedModel, self.pool.hold(model, self.timeout)).host

    def side(self, model: str) -> SideEngine:
        return cast(ServedModel, self.pool.find(model).served).app.state.side

    def release(self, model: str) -> None:
        self.pool.release(model)


def _stalled(pool: ModelPool) -> str | None:
    """The first loaded model whose engine is not serving, named, for /health: one wedged model
    is a server that cannot answer some of its requests."""
    for e in list(pool.entries.values()):
        served = e.served
        if e.status == "loaded" and isinstance(served, ServedModel):
            why = served.host.stalled()
            if why is not None:
                return f"{e.spec.id}: {why}"
    return None


def create_models_app(pool: ModelPool, settings: ServeSettings, api_key: str | None = None, *,
                      store: BatchStore | None = None, bind: str = "127.0.0.1",
                      allow_hosts: Iterable[str] = (), allow_origins: Iterable[str] = (),
                      load_wait_s: float = LOAD_WAIT_S, autoload: bool = True) -> FastAPI:
    """The front door of a multi-model server. The caller closes the pool after the server ends."""
    metrics = PoolMetrics(pool.ids)
    pool.events = PoolEvents(metrics.loaded_in, metrics.unloaded)
    front = ModelsFront(pool, settings.slot_ctx, load_wait_s, autoload)
    app = FastAPI(title="LlamaDesk", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.models, app.state.metrics = front, metrics
    front_door(app, api_key, bind, allow_hosts, allow_origins, lambda: _stalled(pool))

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(front.loaded_metrics()), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def models():
        return JSONResponse(front.listing())

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        return JSONResponse(front.one(model_id))

    @app.get("/models")
    async def router_models():
        return JSONResponse(front.listing(unusable=True))

    @app.post("/models/load")
    async def load(request: Request):
        name = _model_of(await read_json(request))
        await front.take(name)
        pool.release(name)
        return JSONResponse({"success": True})

    @app.post("/models/unload")
    async def unload(request: Request):
        name = _model_of(await read_json(request))
        try:
            fut = pool.unload(name)
        except PoolError as e:
            raise _api_error(e) from None
        await asyncio.wrap_future(fut)
        return JSONResponse({"success": True})

    async def routed(request: Request):
        raw, body = await read_json_bytes(request)
        name = _model_of(body)
        if name is None:
            raise ApiError(400, f"say which model: this server has {', '.join(map(repr, pool.ids))}",
                           "model", "missing_required_parameter")
        try:
            mid = pool.find(name).spec.id
        except PoolError as e:
            raise _api_error(e) from None
        if mid != name:  # another name for it: the model's own app knows it by its id
            raw = json.dumps({**cast(dict, body), "model": mid}, ensure_ascii=False).encode()
        return await front.forward(request, name, raw)

    for path in ROUTED_POST:
        app.add_api_route(path, routed, methods=["POST"])

    @app.get("/tokenizer_info")
    async def tokenizer_info(request: Request):
        return await front.forward(request, request.query_params.get("model"), b"")

    if store is not None:
        runs = BatchRuns(store, PoolHosts(pool), settings.defaults or GenerationSettings(),
                         settings.reasoning_format != "none")
        runs.resume()
        app.state.batch_store, app.state.batches = store, batches.Batches(store, runs)
        app.include_router(files.router)
        app.include_router(batches.router)
    return app
