"""What the hub tests ask of a finished or interrupted pull: its files, its journal, its ranges."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from app.hub import journal, library


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            h.update(block)
    return h.hexdigest()


def models_tree() -> list[str]:
    """Every file under the models folder, relative to it."""
    root = library.root().parent
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def journal_ranges(repo: str, sha: str) -> journal.Ranges:
    _, jpath, _ = library.blob_paths(repo, sha)
    got = journal.read(jpath)
    assert got is not None, f"no journal at {jpath}"
    _, records, _ = got
    return journal.Ranges((s, s + n) for s, n, _ in records)


def landed(repo: str, sha: str) -> int:
    """Bytes the journal says are on disk so far; 0 while there is no journal yet."""
    _, jpath, _ = library.blob_paths(repo, sha)
    got = journal.read(jpath)
    return 0 if got is None else journal.Ranges((s, s + n) for s, n, _ in got[1]).total()


def wait_for(cond, timeout=30.0, what="the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def settled(repo: str, sha: str, quiet_s: float = 0.5, timeout: float = 30.0) -> int:
    """Wait until the journal has stopped growing (the client drained what the mirror sent)."""
    _, jpath, _ = library.blob_paths(repo, sha)
    last, since = -1, time.monotonic()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n = jpath.stat().st_size if jpath.exists() else -1
        if n != last:
            last, since = n, time.monotonic()
        elif n > 0 and time.monotonic() - since >= quiet_s:
            return n
        time.sleep(0.05)
    raise AssertionError("the journal never settled")


def byte_ranges(served) -> list[tuple[int, int]]:
    """[start, end) of each ranged response as far as the mirror got sending it."""
    return [(s.start, s.start + s.sent) for s in served]
