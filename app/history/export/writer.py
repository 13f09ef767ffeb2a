"""Writing an export where the user pointed, without ever leaving half a file.

A regular file is replaced atomically, so a reader (or a crash) sees the old
file or the new one, never half. The temporary file lives next to the real
file because os.replace is only atomic within one filesystem, and "the real
file" is the end of any symlink chain: replacing the link itself would turn it
into a copy and leave its target stale.

A FIFO, a terminal, /dev/null or /dev/stdout is not content that can be
swapped: something reads from it, so we write into it as `cat > x` would.
Opening a FIFO waits for its reader, as a shell redirection does.

A new file gets the mode the umask (and any default ACL) gives, because the
kernel applies them to the mode we create it with; a replaced file keeps its
old mode, so an export does not quietly make a shared file private.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path

from app import atomic_file
from app.history.errors import ExportError

# Paths that name one of our own descriptors: writing to the descriptor keeps
# its offset and append mode, where reopening would write over the start.
_OWN_FD = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")
_MAX_LINKS = 40  # what the kernel allows when it follows a chain itself


def write_text(path: str | Path, text: str) -> Path:
    trailing_slash = str(path).endswith(os.sep)
    path = Path(path)
    data = text.encode("utf-8")
    real: Path | int = path
    st = None
    sent = [0]  # bytes already in a FIFO or device when it failed
    try:
        real = _real_target(path)
        st = _stat(real)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "it is a folder")
        if st is not None and stat.S_ISSOCK(st.st_mode):
            raise ExportError(path, "cannot write it: it is a socket, not a file; nothing was written")
        if trailing_slash:
            raise ExportError(path, "cannot write it: the name ends in / but it is not a folder; "
                                    "nothing was written")
        if isinstance(real, int):
            _write_all(real, data, sent)
        elif st is not None and not stat.S_ISREG(st.st_mode):
            _write_through(real, data, sent)
        elif st is not None and not os.access(real, os.W_OK):
            # The folder would let us swap it, but a read-only file says "keep me".
            raise ExportError(path, "cannot write it: the file is read-only; nothing was written")
        else:
            _replace(real, data, st)
    except OSError as e:
        special = st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)
        undone = "the export is incomplete" if sent[0] else "nothing was written"
        raise ExportError(path, f"cannot write it: {_reason(e, path, real, special)}; {undone}") from e
    return path


def _real_target(path: Path) -> Path | int:
    """Where the bytes should go: the end of the symlink chain, or a descriptor of ours.

    Links are followed one at a time, so a link into /proc's descriptor table
    (/dev/stdout is one) is seen as such: resolving it by name would give a
    pipe's pseudo-name or a file the shell already has open.
    """
    p = Path(os.path.abspath(path))
    for _ in range(_MAX_LINKS):
        m = _OWN_FD.match(str(p))
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        if str(p).startswith("/proc/"):
            return p  # another process's descriptor: the kernel follows it on open
        try:
            link = os.readlink(p)
        except OSError:
            break  # not a link (or not there): p is the end of the chain
        p = Path(os.path.join(os.path.realpath(p.parent), link))
    return Path(os.path.realpath(p))


def _stat(real: Path | int) -> os.stat_result | None:
    try:
        return os.fstat(real) if isinstance(real, int) else os.stat(real)
    except FileNotFoundError:
        return None


def _write_all(fd: int, data: bytes, sent: list[int]) -> None:
    """Into a FIFO or device, counting what went out: a failure says whether any did."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        sent[0] += n
        view = view[n:]


def _write_through(real: Path, data: bytes, sent: list[int]) -> None:
    fd = os.open(real, os.O_WRONLY | os.O_NOCTTY)
    try:
        _write_all(fd, data, sent)
    finally:
        os.close(fd)


def _replace(real: Path, data: bytes, old: os.stat_result | None) -> None:
    with atomic_file.replacing_fd(real) as fd:
        if old is not None:
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
            if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(fd, old.st_uid, old.st_gid)
        atomic_file.write_all(fd, data)


_REASONS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
            errno.EFBIG: "file too large for this file system or limit", errno.EISDIR: "it is a folder",
            errno.ELOOP: "it is a symlink loop", errno.EPIPE: "its reader closed it"}


def _reason(e: OSError, path: Path, real: Path | int, special: bool) -> str:
    """The failure in words, naming the folder when the folder is what is wrong."""
    if e.errno in _REASONS:
        return _REASONS[e.errno]
    folder = real.parent if isinstance(real, Path) and os.path.islink(path) else path.parent
    why = (e.strerror or str(e)).lower()
    if special:
        return why
    if e.errno == errno.ENOENT:
        return f"the folder {folder} does not exist"
    if e.errno == errno.ENOTDIR:
        return f"{folder} is not a folder"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"the folder {folder} is not writable ({why})"
    return why
