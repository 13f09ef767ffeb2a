"""Who may talk to the server from a browser: the Host it was sent to, the page it came from.

A server on 127.0.0.1 is not private from the web pages its user opens. A
page on attacker.example can make its own name resolve to 127.0.0.1 (DNS
rebinding) and then read every answer as same-origin: its requests carry
`Host: attacker.example`, so a Host that is not an address this server
answers to is refused (421). A page can also send requests to another origin
without reading the answer (a form post, a "simple" text/plain fetch: no CORS
preflight), which would be enough to start a generation: a browser marks
those with `Origin` (and `Sec-Fetch-Site`), so a cross-origin request is
refused (403) unless `--allow-origin` names its origin, and only then does a
CORS preflight get its yes. Programs that are not browsers send neither
header and are not affected.

A plain ASGI middleware, outside the key check: a preflight carries no key.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders

from app.serve.http_rules import ApiError, error_response, printable, refused

LOOPBACK_NAMES = ("localhost",)
WILDCARDS = ("0.0.0.0", "::", "")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
METHODS = "GET, POST, OPTIONS"
EXPOSED = "Retry-After"


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def host_name(value: str) -> str:
    """The name of a Host header or an origin's authority, port and IPv6 brackets taken off,
    lower case, without a trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":")[0]
    return value.rstrip(".")


def check_host_name(name: str) -> str:
    """A name for --allow-host, or ValueError in one line."""
    n = name.strip().lower().rstrip(".")
    n = n[1:-1] if n.startswith("[") and n.endswith("]") else n
    if _ip(n) is None and not _NAME.match(n):
        raise ValueError(f"--allow-host {name!r} is not a host name (give a name like llm.lan, without "
                         "a scheme or a port)")
    return n


def check_origin(origin: str) -> str:
    """An origin for --allow-origin (scheme://host[:port], as a browser sends it), or ValueError."""
    if origin.strip() == "*":
        raise ValueError("--allow-origin '*' would let every web page drive the server: name each origin "
                         "(e.g. http://localhost:3000)")
    parts = urlsplit(origin.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/")
            or parts.query or parts.fragment or parts.username or port == -1):
        raise ValueError(f"--allow-origin {origin!r} is not an origin (scheme://host[:port], as a browser "
                         "sends it, e.g. http://localhost:3000)")
    if port == {"http": 80, "https": 443}[parts.scheme]:
        port = None  # a browser leaves a default port out of the origin it sends
    netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:
        netloc = f"[{parts.hostname}]" + (f":{port}" if port is not None else "")
    return f"{parts.scheme}://{netloc}"


class HostRule:
    """The Host names this server answers to: the address it is bound to (and localhost and the
    loopback addresses when that is a loopback one), any IP address when it is bound to all of
    them (an address typed as such cannot be rebound to another machine), and the names allowed."""

    def __init__(self, bound: str = "127.0.0.1", names: Iterable[str] = ()):
        self.bound = host_name(bound)
        self.names = {host_name(n) for n in names}
        ip = _ip(self.bound)
        self.wildcard = self.bound in WILDCARDS
        self.loopback = self.bound in LOOPBACK_NAMES or (ip is not None and ip.is_loopback)
        if _ip(self.bound) is None and not self.wildcard:
            self.names.add(self.bound)

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        name = host_name(header)
        if name in self.names:
            return True
        ip = _ip(name)
        if ip is None:
            return name in LOOPBACK_NAMES and (self.loopback or self.wildcard)
        return self.wildcard or (self.loopback and ip.is_loopback) or name == self.bound


class Guard:
    """Host check, Origin check and CORS for the allowed origins, before anything else runs."""

    def __init__(self, app, hosts: HostRule, origins: Iterable[str] = ()):
        self.app, self.hosts, self.origins = app, hosts, set(origins)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host, origin = headers.get("host"), headers.get("origin")
        if not self.hosts.allows(host):
            await self._refuse(scope, receive, send, ApiError(
                421, f"this server does not answer to Host {printable(host)!r}; start it with --allow-host "
                     "NAME to serve that name", None, "host_not_allowed"))
            return
        site = headers.get("sec-fetch-site", "")
        same = origin is not None and origin == f"http://{host}"
        if origin is not None and not same and origin not in self.origins:
            await self._refuse(scope, receive, send, ApiError(
                403, f"requests from the web page at {printable(origin)!r} are refused; start the server "
                     "with --allow-origin ORIGIN to allow a page", None, "origin_not_allowed"))
            return
        if origin is None and site in ("cross-site", "same-site"):
            await self._refuse(scope, receive, send, ApiError(
                403, f"a {site} browser request without an Origin is refused", None, "origin_not_allowed"))
            return
        if origin is None or same:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(origin, headers, send)
            return
        await self.app(scope, receive, self._with_cors(origin, send))

    @staticmethod
    async def _refuse(scope, receive, send, e: ApiError) -> None:
        refused(scope["path"], e)
        await error_response(e)(scope, receive, send)

    @staticmethod
    async def _preflight(origin: str, headers: Headers, send) -> None:
        asked = headers.get("access-control-request-headers", "")
        allow = [(b"access-control-allow-origin", origin.encode("latin-1")),
                 (b"access-control-allow-methods", METHODS.encode()),
                 (b"access-control-max-age", b"600"), (b"vary", b"Origin")]
        if asked:
            allow.append((b"access-control-allow-headers", asked.encode("latin-1")))
        await send({"type": "http.response.start", "status": 204, "headers": allow})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    def _with_cors(origin: str, send):
        async def cors_send(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                h = MutableHeaders(scope=message)
                h["Access-Control-Allow-Origin"] = origin
                h["Access-Control-Expose-Headers"] = EXPOSED
                h.add_vary_header("Origin")
            await send(message)
        return cors_send
