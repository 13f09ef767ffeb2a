"""What every route shares about HTTP: bodies read within a limit, errors in OpenAI's shape, the key.

OpenAI's clients read every failure as {"error": {...}}: FastAPI's own
{"detail": ...} (its 404, 405 and 422) or a traceback would reach the user as
a parse failure of the client, or leak the server's insides. So every refusal,
LlamaDesk's or the framework's, leaves through `error_response`, and leaves
one warning line in the server's log.

A body is what a client says, so it is read as hostile: its Content-Type is
checked before a byte is parsed (a browser's "simple" text/plain POST needs no
CORS preflight, so a web page could otherwise drive a generation), and a body
nested past any real request's depth, or with a field name no encoder takes,
is one 400, not a RecursionError or a 500 at the answer.
"""

from __future__ import annotations

import hmac
import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from app.serve.protocol import ErrorBody, error_body

log = logging.getLogger("llamadesk.serve")
MAX_BODY = 8 * 1024 * 1024  # a chat request; batch files have their own limit
MAX_DEPTH = 64  # JSON nesting: a JSON schema in response_format is the deepest real request
OPEN = ("/health",)  # answered without the key
INLINE_PARSE = 256 * 1024  # bodies below this are parsed on the loop: a thread hop costs more


class ApiError(Exception):
    """An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with `status`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = headers or {}

    def body(self) -> ErrorBody:
        # A message may quote what the client sent; a lone surrogate in it would fail the answer.
        return error_body(printable(self.message), self.kind, printable(self.param), self.code)


def printable(s: str | None) -> str | None:
    """`s` as UTF-8 can carry it: a lone surrogate becomes its escape, "\\ud800"."""
    return None if s is None else s.encode("utf-8", "backslashreplace").decode("utf-8")


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param, "invalid_value")


def not_found(what: str, ident: str) -> ApiError:
    """The 404 OpenAI answers for a file or batch that is not there."""
    return ApiError(404, f"No such {what}: {ident}", "id", "not_found")


def unavailable(message: str) -> ApiError:
    """The data folder failed under a request (full, read-only, damaged): the server goes on."""
    return ApiError(503, message, None, "storage_unavailable", "server_error")


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


def refused(where: str, e: ApiError) -> None:
    """The one log line of a refused request."""
    log.warning("%s %s: %s %s", where, e.status, printable(e.param) or "-", printable(e.message))


def only_query(request: Request, *honoured: str) -> None:
    """A query parameter this route does not honour is refused, never ignored."""
    for name in request.query_params:
        if name not in honoured:
            raise ApiError(400, f"Unrecognized query parameter: {name}"
                                + (f" (this route takes {', '.join(honoured)})" if honoured else ""),
                           name, "unknown_parameter")


def page(rows: list[dict], limit: int, after: str | None, what: str) -> tuple[list[dict], bool]:
    """OpenAI's cursor paging: up to `limit` rows after the one whose id is `after`, and whether
    more follow. An `after` that names nothing is refused: the client's cursor is wrong."""
    if not 1 <= limit <= 100:
        raise bad("limit", f"limit must be between 1 and 100, got {limit}")
    start = 0
    if after is not None:
        ids = [r["id"] for r in rows]
        if after not in ids:
            raise bad("after", f"after names no {what} of this server: {after!r}")
        start = ids.index(after) + 1
    return rows[start:start + limit], len(rows) > start + limit


def limited(request: Request, limit: int, too_large: ApiError) -> Request:
    """`request` whose body raises `too_large` past `limit` bytes: refused up front by its
    Content-Length, and counted as it arrives (a chunked body declares none)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    seen = 0

    async def receive():
        nonlocal seen
        message = await request.receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large
        return message

    return Request(request.scope, receive)


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _require(request: Request, media_type: str) -> None:
    got = _media_type(request)
    if got != media_type:
        raise ApiError(415, f"the body must be sent as Content-Type: {media_type} (got {got or 'none'!r})",
                       None, "unsupported_media_type")


def check_tree(data) -> None:
    """Refuse a body nested past MAX_DEPTH or with a field name that is not valid Unicode. A loop
    over the containers only, so depth costs no stack and a long list of numbers little time."""
    stack = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(400, f"the request body is nested more than {MAX_DEPTH} levels deep", None,
                           "invalid_json")
        if isinstance(node, dict):
            for k in node:
                if printable(k) != k:
                    raise ApiError(400, f"a field name of the request body is not valid Unicode (a lone "
                                        f"surrogate: {printable(k)!r})", None, "invalid_json")
        values = node.values() if isinstance(node, dict) else node
        stack.extend((v, depth + 1) for v in values if isinstance(v, dict | list))


def _parse(data: bytes):
    try:
        parsed = json.loads(data)
    except RecursionError:
        raise ApiError(400, f"the request body is nested more than {MAX_DEPTH} levels deep", None,
                       "invalid_json") from None
    except ValueError as e:  # UnicodeDecodeError included
        raise ApiError(400, f"the request body is not valid JSON ({e})", None, "invalid_json") from None
    check_tree(parsed)
    return parsed


async def read_json(request: Request, limit: int = MAX_BODY):
    """The body as JSON: 413 past `limit`, 415 unless it is sent as application/json, 400 if it is
    not JSON or is nested too deeply."""
    return (await read_json_bytes(request, limit))[1]


async def read_json_bytes(request: Request, limit: int = MAX_BODY) -> tuple[bytes, object]:
    """read_json's, and the body's bytes too (a multi-model server hands them on to the model)."""
    too_large = ApiError(413, f"the request body is over {limit} bytes", None, "request_too_large")
    limited_request = limited(request, limit, too_large)
    _require(request, "application/json")
    data = await limited_request.body()
    # A big body is parsed and walked in a worker thread: the walk lets go of the GIL, and the
    # loop carries every other client's tokens meanwhile.
    return data, _parse(data) if len(data) < INLINE_PARSE else await run_in_threadpool(_parse, data)


async def read_form(request: Request, limit: int, too_large: ApiError) -> FormData:
    """A multipart body, its files spooled to disk as they arrive (Starlette writes them in a
    worker thread once past 1 MB). The caller closes it."""
    limited_request = limited(request, limit, too_large)
    _require(request, "multipart/form-data")
    return await limited_request.form(max_part_size=limit)


async def _api_error(request: Request, e: ApiError):
    refused(request.url.path, e)
    return error_response(e)


async def _http_error(request: Request, e: HTTPException):
    """Starlette's and FastAPI's own refusals: no such route (404), wrong method (405)..."""
    code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code)
    kind = "invalid_request_error" if e.status_code < 500 else "server_error"
    message = f"{e.detail} ({request.method} {request.url.path})"
    headers = dict(e.headers or {})
    return await _api_error(request, ApiError(e.status_code, message, None, code, kind, headers))


async def _invalid(request: Request, e: RequestValidationError):
    """A query or path parameter FastAPI could not convert: 422 as FastAPI says, OpenAI's shape."""
    first: dict = next(iter(e.errors()), {})
    where = [str(x) for x in first.get("loc", ())]
    param = where[-1] if len(where) > 1 else None
    message = f"{param}: {first.get('msg', 'invalid')}" if param else str(first.get("msg", "invalid request"))
    return await _api_error(request, ApiError(422, message, param, "invalid_value"))


async def _gone(request: Request, e: ClientDisconnect):
    """The client closed the connection before its body was whole: nobody to answer, no crash."""
    log.info("%s %s: the client closed the connection before its body was whole", request.method,
             request.url.path)
    return Response(status_code=400)


async def _storage_failed(request: Request, e: Exception):
    return await _api_error(request, unavailable(str(e)))


async def _storage_bug(request: Request, e: Exception):
    """The store caught a bug of ours (and logged its traceback): 500 with its line, which says
    so, where a 503 would send the operator to a disk that is fine."""
    return await _api_error(request, ApiError(500, str(e), None, "internal_error", "server_error"))


async def _crashed(request: Request, e: Exception):
    """A bug: 500 in OpenAI's shape, its name in the log, never its traceback in the answer."""
    log.error("%s %s crashed: %s: %s", request.method, request.url.path, type(e).__name__, e)
    return error_response(ApiError(500, f"internal error: {type(e).__name__}", None, "internal_error",
                                   "server_error"))


def add_error_handlers(app: FastAPI, storage: tuple[type[Exception], ...] = (),
                       bugs: tuple[type[Exception], ...] = ()) -> None:
    """`storage`: the exceptions that mean the data folder failed, answered 503 with their line.
    `bugs`: those a store raises for a bug of its own, answered 500 with their line: unlike
    `_crashed`'s, the line was written for the client and the server goes on as after a 503."""
    # Starlette types a handler by the base Exception; each of ours takes the class it is registered for.
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, _gone)  # type: ignore[arg-type]
    for cls in storage:
        app.add_exception_handler(cls, _storage_failed)
    for cls in bugs:
        app.add_exception_handler(cls, _storage_bug)
    app.add_exception_handler(Exception, _crashed)


class KeyCheck:
    """`Authorization: Bearer KEY` on every route but /health (/metrics too: its counts say what
    the server is doing), compared in constant time. A plain ASGI middleware: Starlette's
    BaseHTTPMiddleware would copy every streamed token through a memory channel of its own."""

    def __init__(self, app, key: str):
        self.app, self.want = app, f"Bearer {key}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN:
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.want):
                e = ApiError(401, "Incorrect API key provided", None, "invalid_api_key",
                             "authentication_error")
                refused(scope["path"], e)
                await error_response(e)(scope, receive, send)
                return
        await self.app(scope, receive, send)
