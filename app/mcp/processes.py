"""A stdio server's process, as far as the hub must know it: its group, to kill, and its last words.

The SDK starts each server in a session of its own and kills that group when it stops
a server it finds alive, but it hides the process: a server that crashed leaves any
children it started running (the SDK sees the leader gone and kills nothing), and the
hub could not say why it died. So the hub finds the pid the SDK just started, kills
what is left of its group after every stop, and keeps the server's stderr in a
temporary file whose last line is the "why" in a failed server's one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from typing import IO

import psutil

_TAIL = 4096  # bytes of stderr read back for the last line


def children() -> set[int]:
    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children()}
    return set()


def spawned(before: set[int], command: str) -> int | None:
    """The child that appeared since `before` leading a session of its own, running `command`."""
    name = os.path.basename(command)
    leaders = []
    for pid in sorted(children() - before):
        with contextlib.suppress(psutil.Error, OSError):
            if hasattr(os, "getsid") and os.getsid(pid) != pid:
                continue
            if any(os.path.basename(part) == name for part in psutil.Process(pid).cmdline()[:2]):
                return pid
            leaders.append(pid)
    return leaders[0] if len(leaders) == 1 else None  # a launcher that exec'd something else


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_alive(pgid: int) -> bool:
    """Whether a living process is left in the group (the leader may be gone, children not;
    a zombie no one reaps is dead, though kill(0) still finds it)."""
    if sys.platform == "win32":
        return alive(pgid)
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                return True
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left of the server's group (the SDK's gentle stop came first)."""
    if sys.platform == "win32":
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pgid)
            for p in [*proc.children(recursive=True), proc]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def stderr_file() -> IO[str]:
    return tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace", prefix="llamadesk-mcp-")


def last_line(f: IO[str] | None) -> str | None:
    """The last non-empty line the server wrote to stderr, shortened to one readable line."""
    if f is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        fd = f.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _TAIL, max(0, size - _TAIL)).decode("utf-8", "replace")
        lines = [ln.strip() for ln in data.splitlines() if ln.strip()]
        if lines:
            line = lines[-1]
            return line if len(line) <= 200 else line[:199] + "…"
    return None
