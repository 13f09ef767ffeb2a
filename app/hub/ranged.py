"""Ranged GETs over httpx: the transfer huggingface_hub does not do for us.

One client per pull or search, with huggingface_hub's own auth and user-agent headers.
Redirects are followed by httpx, which drops the Authorization header when one leaves the
Hub's origin (the Hub sends LFS files to a CDN with a signed URL), so a token never goes
to a host it was not meant for. A range the server answers as asked is a 206 whose
Content-Range starts where we asked; a 200 means the server ignores ranges and sends the
whole file, which the callers handle (one stream from byte 0), never mistake for the part.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx

from app.hub.api import auth_headers, status_error
from app.hub.errors import HubError

CONNECT_S, READ_S = 15.0, 60.0


def client() -> httpx.Client:
    headers = {**auth_headers(), "Accept-Encoding": "identity"}  # sizes and ranges are of the bytes
    return httpx.Client(headers=headers, follow_redirects=True, max_redirects=5,
                        timeout=httpx.Timeout(READ_S, connect=CONNECT_S),
                        limits=httpx.Limits(max_connections=16, max_keepalive_connections=16))


class RangeIgnored(HubError):
    """The server sent the whole file (200) to a request for part of it."""


@contextlib.contextmanager
def ranged(http: httpx.Client, url: str, start: int, end: int, size: int, repo: str,
           whole_ok: bool = False) -> Iterator[httpx.Response]:
    """A streaming response for bytes [start, end) of a `size`-byte file; raises RangeIgnored for
    a 200 unless `whole_ok` (then the body starts at byte 0), HubError for any other answer."""
    headers = {} if start == 0 and end == size else {"Range": f"bytes={start}-{end - 1}"}
    with http.stream("GET", url, headers=headers) as r:
        if r.status_code == 206:
            got = r.headers.get("Content-Range", "")
            if not got.startswith(f"bytes {start}-"):
                raise HubError(f"{url}: asked for bytes from {start}, the server sent {got or 'no range'}")
        elif r.status_code == 200:
            if start != 0 and not whole_ok:
                raise RangeIgnored(f"{url}: the server does not send byte ranges")
        else:
            raise status_error(url, r.status_code, repo)
        yield r
