"""A remote GGUF's header from its first bytes, so the fit is known before the download.

The header's length is not known up front (the vocabulary alone is megabytes for a
262k-token model), so the prefix grows: 1 MiB, then twice as much each time, fetching
only the bytes not yet held. A server that ignores ranges is read from byte 0 and the
stream closed once the prefix is long enough.
"""

from __future__ import annotations

import httpx

from app.engine.errors import ModelFileError
from app.engine.gguf import GGUFHeader, HeaderNeedsMore, header_from_prefix
from app.hub.api import RemoteFile, transport_line
from app.hub.errors import HubError
from app.hub.ranged import ranged

FIRST = 1 << 20
LIMIT = 256 << 20  # no real header is this long; a file that claims one is refused


def fetch_header(http: httpx.Client, f: RemoteFile, first: int = FIRST) -> GGUFHeader:
    """The header, or HubError in one line for whatever the server or the way to it did: a
    search lists each repository whose header could not be read with the reason, beside the
    others (a redirect loop, a CDN that is down, a scheme httpx does not speak)."""
    try:
        return _fetch_header(http, f, first)
    except httpx.HTTPError as e:
        raise HubError(f"{f.repo}/{f.name}: {transport_line(e) or e}") from None


def _fetch_header(http: httpx.Client, f: RemoteFile, first: int) -> GGUFHeader:
    buf = bytearray()
    want = min(first, f.size)
    url = f.url()
    while True:
        with ranged(http, url, len(buf), want, f.size, f.repo, whole_ok=True) as r:
            if r.status_code == 200:
                buf.clear()
            for chunk in r.iter_bytes():
                buf += chunk
                if len(buf) >= want:
                    break
        del buf[want:]
        try:
            return header_from_prefix(bytes(buf), f.size, f"{f.repo}/{f.name}")
        except HeaderNeedsMore:
            if want >= f.size or want >= LIMIT:
                raise HubError(f"{f.repo}/{f.name}: no complete GGUF header in its first "
                               f"{want:,} bytes") from None
            want = min(want * 2, f.size)
        except ModelFileError as e:
            raise HubError(str(e)) from None
