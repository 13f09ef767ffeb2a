"""HTTP to an OpenAI-compatible server through httpx, every failure turned into one line.

httpx because it streams, has separate connect and read timeouts (the read
timeout is how a stalled server is noticed), and its exceptions say which
step failed; httpx-sse parses the event stream (comments, multi-line data,
keep-alives) so no hand-written SSE parser lives here.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from collections.abc import Callable, Iterator

import httpx

from app.remote.endpoint import Endpoint
from app.remote.errors import Fix, RemoteError

Notice = Callable[[str], None]
MAX_RETRY_AFTER_S = 60.0  # a longer wait is reported, not slept through
RETRIES = 2


def client(ep: Endpoint) -> httpx.Client:
    timeout = httpx.Timeout(connect=ep.connect_s, read=ep.stall_s, write=30.0, pool=30.0)
    return httpx.Client(timeout=timeout, headers=ep.headers(), follow_redirects=False, trust_env=False)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


MALFORMED = "the server sent a malformed reply"


def transport_reason(exc: httpx.TransportError | httpx.DecodingError, ep: Endpoint) -> str:
    """What a network-level failure means to the user, without the exception chain (or the key)."""
    text = ep.scrub(str(exc) or type(exc).__name__)
    if isinstance(exc, httpx.DecodingError):
        return f"{MALFORMED} (its content encoding cannot be decoded: {_one_line(text)})"
    low = text.lower()
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no answer within {ep.connect_s:g} s (connect timeout)"
    if isinstance(exc, httpx.ReadTimeout):
        return f"no data from the server for {ep.stall_s:g} s (it stalled)"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({_one_line(text)})"
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLError) or "ssl" in low or "certificate" in low:
        return f"TLS error: {_one_line(text)}"
    if isinstance(exc, httpx.ConnectError):
        if "refused" in low:
            return "connection refused (is the server running on that port?)"
        if any(s in low for s in ("name or service not known", "nodename nor servname", "getaddrinfo",
                                  "name resolution", "no address associated")):
            return "host name not found (DNS lookup failed)"
        return f"could not connect ({_one_line(text)})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection in the middle of a response"
    return f"the connection failed ({_one_line(text)})"


def _error_detail(resp: httpx.Response) -> str:
    """The server's own message: OpenAI's {"error": {"message"}}, vLLM's, Ollama's, FastAPI's."""
    try:
        body = resp.json()
    except (ValueError, UnicodeDecodeError):
        return _one_line(resp.text) if "html" not in resp.headers.get("content-type", "") else ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or ""
        else:
            msg = err
        return _one_line(msg or body.get("message") or body.get("detail") or "")
    return ""


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare enough to treat as "not said"


def status_reason(resp: httpx.Response, ep: Endpoint, path: str) -> tuple[str, Fix | None]:
    """What the status means, and the option that would cure it (a key the server wants)."""
    reason = _status_reason(resp, ep, path)
    if resp.status_code in (401, 403) and not ep.api_key:
        return reason, Fix("give one with", "api_key")
    return reason, None


def _status_reason(resp: httpx.Response, ep: Endpoint, path: str) -> str:
    code = resp.status_code
    detail = ep.scrub(_error_detail(resp))
    said = f": {detail}" if detail else ""
    if code in (401, 403):
        if not ep.api_key:
            return f"the server wants an API key (HTTP {code}{said})"
        return f"the server refused the API key ({ep.masked()}; HTTP {code}{said})"
    if code == 404:
        return f"HTTP 404 for {path}{said or ' (not an OpenAI-compatible endpoint, or no such model)'}"
    if code == 429:
        after = _retry_after(resp)
        wait = f"; it asks to retry after {after:g} s" if after is not None else ""
        return f"the server is busy (HTTP 429{said}){wait}"
    if code >= 500:
        return f"server error (HTTP {code}{said})"
    return f"the server rejected the request (HTTP {code}{said})"


def check(resp: httpx.Response, ep: Endpoint, path: str) -> None:
    """Raise RemoteError for an error status or an answer that is not the API's JSON."""
    if resp.status_code >= 400:
        resp.read()
        raise RemoteError(ep.base_url, *status_reason(resp, ep, path))
    ctype = resp.headers.get("content-type", "")
    if "html" in ctype:
        raise RemoteError(ep.base_url, f"not an OpenAI-compatible server: {path} answered an HTML page")


def get_json(http: httpx.Client, ep: Endpoint, url: str, path: str) -> dict | list:
    try:
        resp = http.get(url)
    except (httpx.TransportError, httpx.DecodingError) as e:
        raise RemoteError(ep.base_url, transport_reason(e, ep)) from None
    check(resp, ep, path)
    try:
        return resp.json()
    except (ValueError, UnicodeDecodeError):
        raise RemoteError(ep.base_url, f"not an OpenAI-compatible server: {path} did not answer JSON") \
            from None


def try_json(http: httpx.Client, url: str) -> dict | list | None:
    """A server-specific extra (llama-server's /props, Ollama's /api/version): None when absent."""
    try:
        resp = http.get(url, timeout=5.0)
        if resp.status_code != 200 or "json" not in resp.headers.get("content-type", ""):
            return None
        return resp.json()
    except (httpx.HTTPError, ValueError):
        return None


@contextlib.contextmanager
def open_stream(http: httpx.Client, ep: Endpoint, path: str, body: dict,
                notice: Notice | None = None, cancel=None) -> Iterator[httpx.Response | None]:
    """POST `body` and yield the streaming response once its status is good.

    A 429 with a Retry-After the server set is waited out (up to
    MAX_RETRY_AFTER_S, RETRIES times) and said through `notice`; nothing
    else is retried, because a reply may already be running on the server.
    A Stop (`cancel`) during that wait ends it at once, and None is yielded:
    the user must not sit through a minute the server asked for.
    """
    url = ep.base_url + path
    for attempt in range(RETRIES + 1):
        try:
            cm = http.stream("POST", url, json=body)
            resp = cm.__enter__()
        except httpx.TransportError as e:
            raise RemoteError(ep.base_url, transport_reason(e, ep)) from None
        try:
            if resp.status_code == 429 and attempt < RETRIES:
                after = _retry_after(resp)
                if after is not None and after <= MAX_RETRY_AFTER_S:
                    if notice:
                        notice(f"{ep.host} is busy (HTTP 429): retrying in {after:g} s, as it asked")
                    cm.__exit__(None, None, None)
                    if not _waited_out(after, cancel):
                        break
                    continue
            check(resp, ep, path)
        except BaseException:
            cm.__exit__(None, None, None)
            raise
        try:
            yield resp
        finally:
            cm.__exit__(None, None, None)
        return
    yield None  # stopped while waiting out a 429 (every other way out returns or raises above)


def _waited_out(seconds: float, cancel) -> bool:
    """Sleep `seconds`; False as soon as `cancel` is set."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if cancel is not None and cancel.is_set():
            return False
        time.sleep(min(left, 0.05))
    return cancel is None or not cancel.is_set()


def parse_data(data: str, ep: Endpoint) -> dict:
    try:
        obj = json.loads(data)
    except ValueError:
        raise RemoteError(ep.base_url, "malformed stream: an event is not JSON "
                                       f"({ep.scrub(_one_line(data, 60))!r})") from None
    if not isinstance(obj, dict):
        raise RemoteError(ep.base_url, "malformed stream: an event is not a JSON object")
    if "error" in obj and "choices" not in obj:  # an error sent inside the stream
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise RemoteError(ep.base_url, f"the server stopped with an error: {ep.scrub(_one_line(msg or err))}")
    return obj
