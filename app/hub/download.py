"""The resumable transfer: several ranged parts at once into one preallocated partial file,
each byte recorded in the journal as it lands, the whole checked against the Hub's sha256
before it is renamed into place as a model.

huggingface_hub's hf_hub_download downloads into a temporary file unique to its process and
deletes it on any failure (and its CLI likewise), so a kill, a dropped connection that
outlasts its retries, or a reboot starts the file again from byte 0; for a 5 GB model
that is the difference between a minute and an hour. Hence this module, over httpx.

- The partial is allocated whole before the first byte (posix_fallocate), so a disk that
  cannot hold the file says so at once instead of failing at 90%.
- Parts are threads, one connection each; the main thread only reports progress, syncs the
  journal every second and takes Ctrl+C, after which the parts stop at their next chunk.
- A dropped connection is retried from the byte it stopped at, with a growing pause.
- A server that ignores ranges gets one stream from byte 0 instead.
- A file whose sha256 is wrong is deleted and fetched once more; wrong twice, it is an error.
- `halt`, an Event a front end sets from any thread (the window's Pause and Cancel), stops a
  transfer as Ctrl+C does: the parts stop at their next chunk, the journal is checkpointed
  and Paused is raised, so a window pauses and resumes through the same path as the CLI.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import httpx

from app.engine.gguf import human_size
from app.hub import library
from app.hub.api import RemoteFile, transport_line
from app.hub.errors import DiskSpaceError, DownloadStopped, HubError, HubRequestError
from app.hub.journal import Journal
from app.hub.ranged import RangeIgnored, ranged
from app.hub.resources import free_disk

Progress = Callable[[str, int, int], None]  # (phase: "download" | "verify", done, total)
MIN_PART = 8 << 20
CHECKPOINT_S = 1.0
RETRIES = 6


@dataclass
class Outcome:
    path: Path
    fetched: int  # bytes transferred by this run
    resumed_at: int  # bytes already on disk when it started
    seconds: float
    attempts: int  # 2 when the first copy failed its sha256 check


class Paused(DownloadStopped):
    """Ctrl+C: the partial and its journal are kept for `llamadesk pull` to resume."""

    def __init__(self, done: int, size: int):
        self.done, self.size = done, size
        super().__init__(f"paused with {human_size(done)} of {human_size(size)} kept")


def fetch(http: httpx.Client, f: RemoteFile, revision: str, parts: int = 4,
          progress: Progress | None = None, halt: threading.Event | None = None) -> Outcome:
    """Download `f` (resuming a partial of it), verify it and install it as a model; Paused
    once `halt` is set (checked every tenth of a second, in the transfer and the check)."""
    from filelock import FileLock, Timeout

    partial, journal_path, lock_path = library.blob_paths(f.repo, f.sha256 or "")
    partial.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise HubError(f"{f.repo}/{f.name}: another llamadesk pull is downloading it now") from None
    try:
        t0 = time.monotonic()
        for attempt in (1, 2):
            run = _Run(http, f, partial, journal_path, parts, progress, halt)
            resumed_at = run.start()
            fetched = run.transfer()
            if _sha256(partial, f.size, progress, halt) == f.sha256:
                break
            for p in (partial, journal_path):
                p.unlink(missing_ok=True)
            if attempt == 2:
                raise HubError(f"{f.repo}/{f.name}: the file arrived damaged twice (its sha256 is not the "
                               f"Hub's {(f.sha256 or '')[:12]}…); nothing was kept")
        dest = _install(f, partial, journal_path, revision)
        return Outcome(dest, fetched, resumed_at, time.monotonic() - t0, attempt)
    finally:
        lock.release()
        lock_path.unlink(missing_ok=True)


class _Run:
    """One pass over the bytes still missing."""

    def __init__(self, http, f: RemoteFile, partial: Path, journal_path: Path, parts: int, progress,
                 halt: threading.Event | None = None):
        self.http, self.f, self.partial, self.journal_path = http, f, partial, journal_path
        self.parts, self.progress, self.halt = max(1, parts), progress, halt
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.fetched = 0
        self._count = threading.Lock()

    def start(self) -> int:
        """Open the partial (allocating it when new) and its journal; bytes already held."""
        expect = {"sha256": self.f.sha256, "size": self.f.size}
        fresh = not self.partial.exists() or self.partial.stat().st_size != self.f.size
        self.fd = os.open(self.partial, os.O_RDWR | os.O_CREAT, 0o666)
        jr = None if fresh else Journal.resume(self.journal_path, self.fd, expect)
        if jr is None:
            self._allocate()
            jr = Journal.create(self.journal_path, {**expect, "repo": self.f.repo, "name": self.f.name,
                                                    "commit": self.f.commit})
        self.journal = jr
        return jr.done()

    def _allocate(self) -> None:
        need = self.f.size - library._allocated(self.partial)
        free = free_disk(self.partial.parent)
        if need > free:
            self._close_and_remove()
            raise DiskSpaceError(f"{self.f.repo}/{self.f.name} needs {human_size(self.f.size)} and "
                                 f"{self.partial.parent.parent.parent} has {human_size(free)} free; "
                                 "nothing was downloaded")
        try:
            os.ftruncate(self.fd, 0)
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(self.fd, 0, self.f.size)
            else:  # pragma: no cover - macOS, Windows: a sparse file, checked by the free space above
                os.ftruncate(self.fd, self.f.size)
        except OSError as e:
            self._close_and_remove()
            raise _disk_error(self.f, e, "nothing was downloaded") from None

    def _close_and_remove(self) -> None:
        os.close(self.fd)
        self.partial.unlink(missing_ok=True)
        self.journal_path.unlink(missing_ok=True)

    def transfer(self) -> int:
        """Fetch every gap; returns the bytes this pass transferred."""
        try:
            gaps = self.journal.gaps()
            try:
                self._parallel(_split(gaps, self.parts))
            except RangeIgnored:
                self.journal.close()
                self.journal = Journal.create(self.journal_path, self.journal.meta)  # from byte 0
                self._parallel([(0, self.f.size)])
            return self.fetched
        finally:
            self.journal.close()
            os.close(self.fd)

    def _parallel(self, plan: list[tuple[int, int]]) -> None:
        self.stop.clear()
        self.errors.clear()
        workers = [threading.Thread(target=self._part, args=ab, daemon=True, name="llamadesk-pull")
                   for ab in plan]
        for w in workers:
            w.start()
        last = time.monotonic()
        try:
            while any(w.is_alive() for w in workers):
                for w in workers:
                    w.join(0.1)
                self._report()
                if self.halt is not None and self.halt.is_set():
                    self._pause(workers)
                if time.monotonic() - last >= CHECKPOINT_S:
                    self.journal.checkpoint(self.fd)
                    last = time.monotonic()
        except KeyboardInterrupt:
            self._pause(workers)
        self.journal.checkpoint(self.fd)
        self._report()
        if self.errors:
            raise self.errors[0]

    def _pause(self, workers) -> NoReturn:
        self._halt(workers)
        raise Paused(self.journal.done(), self.f.size) from None

    def _halt(self, workers) -> None:
        self.stop.set()
        deadline = time.monotonic() + 3
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
        self.journal.checkpoint(self.fd)

    def _report(self) -> None:
        if self.progress:
            self.progress("download", self.journal.done(), self.f.size)

    def _part(self, a: int, b: int) -> None:
        try:
            self._fetch_range(a, b)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
            self.errors.append(e)
            self.stop.set()

    def _fetch_range(self, pos: int, end: int) -> None:
        tries = 0
        while pos < end and not self.stop.is_set():
            before = pos
            try:
                with ranged(self.http, self.f.url(), pos, end, self.f.size, self.f.repo) as r:
                    for chunk in r.iter_bytes():
                        if self.stop.is_set():
                            return
                        pos = self._write(pos, chunk[: end - pos])
                        tries = 0
                        if pos >= end:
                            return
            except httpx.TransportError as e:
                if tries >= RETRIES:
                    raise HubError(f"{self.f.repo}/{self.f.name}: the connection failed {tries + 1} "
                                   f"times running ({e or type(e).__name__}); the partial is kept: "
                                   "run the same pull again to resume") from None
            except httpx.HTTPError as e:  # a redirect loop, an undecodable body: a retry ends the same
                raise HubError(f"{self.f.repo}/{self.f.name}: {transport_line(e) or e}; the partial is "
                               "kept: run the same pull again to resume") from None
            except HubError as e:
                if isinstance(e, (HubRequestError, RangeIgnored)) or tries >= RETRIES:
                    raise
            else:
                if pos == before:  # a body that ended early without a byte: the server is not sending
                    tries += 1
                    if tries > RETRIES:
                        raise HubError(f"{self.f.repo}/{self.f.name}: the server stopped sending at byte "
                                       f"{pos:,}; the partial is kept: run the same pull again to resume")
                continue
            tries += 1
            self.stop.wait(min(0.2 * 2 ** tries, 5.0))

    def _write(self, pos: int, data: bytes) -> int:
        try:
            view = memoryview(data)
            while view:
                n = os.pwrite(self.fd, view, pos)
                self.journal.record(pos, view[:n])
                pos += n
                view = view[n:]
        except OSError as e:
            raise _disk_error(self.f, e, "the partial is kept") from None
        with self._count:
            self.fetched += len(data)
        return pos


def _split(gaps: list[tuple[int, int]], parts: int) -> list[tuple[int, int]]:
    """The gaps cut into about `parts` pieces of similar size, none under MIN_PART."""
    total = sum(b - a for a, b in gaps)
    if not total:
        return []
    target = max(MIN_PART, -(-total // parts))
    out: list = []
    for a, b in gaps:
        n = max(1, round((b - a) / target))
        step = -(-(b - a) // n)
        out.extend((s, min(s + step, b)) for s in range(a, b, step))
    return out


def _disk_error(f: RemoteFile, e: OSError, kept: str) -> HubError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskSpaceError(f"{f.repo}/{f.name}: no space left on the device (needs "
                              f"{human_size(f.size)}); {kept}")
    if e.errno == errno.EFBIG:
        return DiskSpaceError(f"{f.repo}/{f.name}: file too large for this file system or limit "
                              f"(needs {human_size(f.size)}); {kept}")
    why = (e.strerror or str(e)).lower()
    return HubError(f"{f.repo}/{f.name}: cannot write the download ({why}); {kept}")


def _sha256(path: Path, size: int, progress: Progress | None, halt: threading.Event | None = None) -> str:
    h = hashlib.sha256()
    done = 0
    with open(path, "rb") as fh:
        while block := fh.read(8 << 20):
            if halt is not None and halt.is_set():
                raise Paused(size, size)  # every byte is kept; a resume checks them again
            h.update(block)
            done += len(block)
            if progress:
                progress("verify", done, size)
    return h.hexdigest()


def _install(f: RemoteFile, partial: Path, journal_path: Path, revision: str) -> Path:
    """The verified file renamed into its snapshot (the moment it becomes a model), then the ref."""
    dest = library.snapshot_path(f.repo, f.commit, f.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, dest)
    fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself reaches the disk
    finally:
        os.close(fd)
    journal_path.unlink(missing_ok=True)
    library.write_ref(f.repo, revision, f.commit)
    return dest
