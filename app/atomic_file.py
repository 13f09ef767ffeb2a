"""Replacing a file whole or not at all: the one temp-file-then-rename every writer uses.

Settings, saved comparisons, prompt-cache sidecars and states, the assembled
default model, the server's batch files and the exports all need the same
promise: a reader, or a crash, sees the old file or the new one, never half.
The temporary file lives beside the real one because os.replace is only
atomic within one file system; it is flushed to disk before the rename (a
rename that reaches the disk before the data would leave an empty file after
a power cut), and it is removed on any failure, so nothing is left behind.

A file that could not be used in full is copied aside (`keep_aside`) before a
writer replaces it, so a hand edit or a damaged file is never lost: the
settings and the presets both do.

Lives below every layer (it imports nothing of LlamaDesk's) so the engine and
the store can both use it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

TEMP_SUFFIX = ".tmp"  # what a cleaner may treat as a leftover of a crashed writer

log = logging.getLogger("llamadesk.files")


def temp_beside(path: Path, mode: int = 0o666) -> tuple[int, Path]:
    """A fresh file next to `path`, opened for writing; created with `mode` (0o666 lets the
    umask and default ACLs apply, as for any new file)."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name[:80]}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOCTTY, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it", str(path))


@contextlib.contextmanager
def replacing(path: str | Path, mode: int = 0o666) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on a clean exit it replaces `path`.

    For writers that fill the file themselves (llama.cpp's state writer takes a
    path, not a descriptor); the temporary file exists, empty, when the block
    starts. On an exception it is removed and `path` is untouched.
    """
    path = Path(path)
    fd, tmp = temp_beside(path, mode)
    os.close(fd)
    try:
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def replacing_fd(path: str | Path, mode: int = 0o666) -> Iterator[int]:
    """Yield a descriptor open for writing on a temporary file that replaces `path` on a clean
    exit (synced first); on an exception it is removed and `path` is untouched."""
    path = Path(path)
    fd, tmp = temp_beside(path, mode)
    try:
        yield fd
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_all(fd: int, data: bytes) -> int:
    """Write every byte (os.write may take only part); returns how many went out."""
    view = memoryview(data)
    sent = 0
    while view:
        n = os.write(fd, view)
        sent += n
        view = view[n:]
    return sent


def write_bytes(path: str | Path, data: bytes) -> None:
    with replacing_fd(path) as fd:
        write_all(fd, data)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def keep_aside(path: Path, why: str = "unusable") -> Path | None:
    """Copy `path` to `<name>.<why>-<time>` beside it before anything saves over it (a second
    copy in the same second gets its own name); None if even that fails (logged)."""
    stem = f"{path.name}.{why}-{time.strftime('%Y%m%d-%H%M%S')}"
    dest = path.with_name(stem)
    n = 2
    while dest.exists():
        dest, n = path.with_name(f"{stem}-{n}"), n + 1
    try:
        shutil.copy2(path, dest)
    except OSError as e:
        log.warning("could not keep a copy of %s: %s", path, e)
        return None
    return dest
