"""Reading a file LlamaDesk keeps for itself, without ever blocking on something that is not one.

The caches (saved prompt states and their sidecars, the model-hash memo, the
bandwidth probe's figures) live in folders any local program can write to. A
FIFO put in place of one of them would make a plain open() wait for a writer
forever, and a device could feed endless bytes. So these are opened
non-blocking, checked to be regular files on the open descriptor (no race
with a swap after a stat), and read up to a limit. Anything else is an
OSError, which every caller already treats as "not there".

Lives below every layer (it imports nothing of LlamaDesk's).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

DEFAULT_LIMIT = 16 << 20  # a memo or a sidecar is kilobytes; this bounds a hostile one


def read_bytes(path: str | Path, limit: int = DEFAULT_LIMIT) -> bytes:
    """The file's bytes; OSError if it is not a regular file or is larger than `limit`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return data
    finally:
        os.close(fd)


def is_regular(path: str | Path) -> bool:
    """Whether `path` is a regular file now (not following a dangling name into a hang)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def read_json_object(path: str | Path, limit: int = DEFAULT_LIMIT) -> dict | None:
    """A JSON object kept in a regular file, or None for anything else (missing, a FIFO, damaged)."""
    try:
        d = json.loads(read_bytes(path, limit).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None
