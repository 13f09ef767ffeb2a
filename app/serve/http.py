"""What every route shares about HTTP: bodies read within a limit, errors in OpenAI's shape, the key.

OpenAI's clients read every failure as {"error": {...}}: FastAPI's own
{"detail": ...} (its 404, 405 and 422) or a traceback would reach the user as
a parse failure of the client, or leak the server's insides. So every refusal,
LlamaDesk's or the framework's, leaves through `error_response`, and leaves
one warning line in the server's log.
"""

from __future__ import annotations

import hmac
import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from app.serve.protocol import ErrorBody, error_body

log = logging.getLogger("llamadesk.serve")
MAX_BODY = 8 * 1024 * 1024  # a chat request; batch files have their own limit


class ApiError(Exception):
    """An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with `status`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = headers or {}

    def body(self) -> ErrorBody:
        return error_body(self.message, self.kind, self.param, self.code)


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param, "invalid_value")


def not_found(what: str, ident: str) -> ApiError:
    """The 404 OpenAI answers for a file or batch that is not there."""
    return ApiError(404, f"No such {what}: {ident}", "id", "not_found")


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


def refused(where: str, e: ApiError) -> None:
    """The one log line of a refused request."""
    log.warning("%s %s: %s %s", where, e.status, e.param or "-", e.message)


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


async def read_json(request: Request, limit: int = MAX_BODY):
    """The body as JSON, 413 past `limit`, 400 if it is not JSON."""
    too_large = ApiError(413, f"the request body is over {limit} bytes", None, "request_too_large")
    data = await limited(request, limit, too_large).body()
    try:
        return json.loads(data)
    except ValueError as e:  # UnicodeDecodeError included
        raise ApiError(400, f"the request body is not valid JSON ({e})", None, "invalid_json") from None


async def read_form(request: Request, limit: int, too_large: ApiError) -> FormData:
    """A multipart body, its files spooled to disk as they arrive (Starlette writes them in a
    worker thread once past 1 MB). The caller closes it."""
    return await limited(request, limit, too_large).form(max_part_size=limit)


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


async def _crashed(request: Request, e: Exception):
    """A bug: 500 in OpenAI's shape, its name in the log, never its traceback in the answer."""
    log.error("%s %s crashed: %s: %s", request.method, request.url.path, type(e).__name__, e)
    return error_response(ApiError(500, f"internal error: {type(e).__name__}", None, "internal_error",
                                   "server_error"))


def add_error_handlers(app: FastAPI) -> None:
    # Starlette types a handler by the base Exception; each of ours takes the class it is registered for.
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _crashed)


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
                e = ApiError(401, "Incorrect API key provided", None, "invalid_api_key",
                             "authentication_error")
                refused(scope["path"], e)
                await error_response(e)(scope, receive, send)
                return
        await self.app(scope, receive, send)
