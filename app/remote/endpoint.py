"""Where a remote engine lives and how to authenticate, checked before any request.

The API key is held only in memory: it comes from an environment variable or
the system keyring (app.remote.keys) and is never written to the history,
exports, logs, bench output or config; `masked()` is all anything shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from app.remote.errors import EndpointConfigError

DEFAULT_STALL_S = 60.0  # no byte for this long mid-reply: the server is stuck
DEFAULT_CONNECT_S = 10.0


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # the OpenAI base, ending in /v1 (or the server's own prefix)
    api_key: str | None = field(default=None, repr=False)
    stall_s: float = DEFAULT_STALL_S
    connect_s: float = DEFAULT_CONNECT_S

    @classmethod
    def parse(cls, url: str, api_key: str | None = None, stall_s: float = DEFAULT_STALL_S) -> Endpoint:
        """A URL a user typed, refused in one line if it cannot be an HTTP endpoint.

        A bare host (`http://box:8080`) gets the conventional `/v1`: every
        OpenAI-compatible server in the README serves its API there, and the
        full URL is what the model bar and `ask` then show.
        """
        text = url.strip()
        if not text:
            raise EndpointConfigError("the endpoint URL is empty")
        if "://" not in text:
            raise EndpointConfigError(f"{text}: not a URL (expected http://host:port/v1)")
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as e:
            raise EndpointConfigError(f"{text}: not a valid URL ({e})") from None
        if parts.scheme not in ("http", "https"):
            raise EndpointConfigError(f"{text}: the scheme must be http or https, not {parts.scheme!r}")
        if not parts.hostname:
            raise EndpointConfigError(f"{text}: no host name")
        if parts.username or parts.password:
            raise EndpointConfigError(f"{text}: put the API key in an environment variable or the keyring, "
                                      "not in the URL")
        if not stall_s > 0:
            raise EndpointConfigError(f"the stall timeout must be more than 0 seconds, got {stall_s}")
        if api_key:
            check_key(api_key)
        path = parts.path.rstrip("/") or "/v1"
        netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
        if ":" in parts.hostname:  # an IPv6 literal keeps its brackets
            netloc = f"[{parts.hostname}]" + ("" if port is None else f":{port}")
        return cls(urlunsplit((parts.scheme, netloc, path, "", "")), api_key or None, stall_s)

    @property
    def root(self) -> str:
        """The server's own root, where llama-server's /props and Ollama's /api live."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).netloc

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def masked(self) -> str:
        """The key as the UI and the CLI may show it."""
        k = self.api_key
        if not k:
            return "no API key"
        return "API key " + (f"{k[:3]}…{k[-4:]}" if len(k) > 12 else "…" * 3)

    def scrub(self, text: str) -> str:
        """`text` with the key masked wherever it appears: a server's error message may echo the
        Authorization header, and a transport error may quote it."""
        k = self.api_key
        if not k or k not in text:
            return text
        return text.replace(k, f"<{self.masked()}>")


def check_key(key: str) -> None:
    """Refuse, in one line that does not show it, a key no HTTP header can carry."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        raise EndpointConfigError("the API key contains a control character (a newline or a tab, perhaps "
                                  "copied with it): an HTTP header cannot carry it")
    if not key.isascii():
        raise EndpointConfigError("the API key contains a character that is not ASCII: an HTTP header "
                                  "cannot carry it")
