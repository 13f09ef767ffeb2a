"""Which bytes of a partial download are on disk, written so that a kill -9 at any instant, or a
power cut, never makes it claim a byte it does not hold.

The journal sits beside the partial file: one JSON line naming the file (repository, name,
commit, size, sha256), written whole by temp-then-rename, then fixed 24-byte records
appended as bytes land: (start, length, crc32 of those bytes, crc32 of the record). A
record is appended right after its bytes are written, both into the kernel's cache, so a
killed process loses at most the bytes it held in memory, and a resume starts at the exact
byte the journal names. A power cut can lose cached writes in any order, so every second
the partial is synced and then a mark record is appended and synced: records before the
last mark are trusted, records after it are checked against the data by their crc32 when
the journal is reopened, and one whose bytes did not survive is dropped (and fetched
again). A torn last record fails its own crc and ends the journal there.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import struct
import threading
import zlib
from pathlib import Path

from app import atomic_file

RECORD = struct.Struct("<QQII")
MARK = 2**64 - 1
VERSION = 1


class Ranges:
    """Disjoint, sorted [start, end) intervals, merged as they are added."""

    def __init__(self, pairs=()):
        self.starts: list[int] = []
        self.ends: list[int] = []
        for a, b in pairs:
            self.add(a, b)

    def add(self, a: int, b: int) -> None:
        if b <= a:
            return
        i = bisect.bisect_left(self.ends, a)  # first interval that ends at or after a
        j = bisect.bisect_right(self.starts, b)  # intervals from i to j-1 touch [a, b)
        if i < j:
            a, b = min(a, self.starts[i]), max(b, self.ends[j - 1])
        self.starts[i:j], self.ends[i:j] = [a], [b]

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends))

    def total(self) -> int:
        return sum(b - a for a, b in zip(self.starts, self.ends))

    def gaps(self, size: int) -> list[tuple[int, int]]:
        out, pos = [], 0
        for a, b in zip(self.starts, self.ends):
            if a > pos:
                out.append((pos, a))
            pos = max(pos, b)
        if pos < size:
            out.append((pos, size))
        return out


def _record(start: int, length: int, data_crc: int) -> bytes:
    head = struct.pack("<QQI", start, length, data_crc)
    return head + struct.pack("<I", zlib.crc32(head))


def read(path: Path) -> tuple[dict, list[tuple[int, int, int]], int] | None:
    """(meta, records as (start, length, crc), index of the first record after the last mark),
    or None for a journal that is missing or not one of ours."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    line, sep, body = raw.partition(b"\n")
    try:
        meta = json.loads(line)
    except ValueError:
        return None
    if not sep or not isinstance(meta, dict) or meta.get("journal") != VERSION:
        return None
    records: list[tuple[int, int, int]] = []
    trusted = 0
    for off in range(0, len(body) - RECORD.size + 1, RECORD.size):
        start, length, crc, check = RECORD.unpack_from(body, off)
        if zlib.crc32(body[off:off + 20]) != check:
            break  # torn or damaged: nothing after it is believed
        if start == MARK:
            trusted = len(records)
        else:
            records.append((start, length, crc))
    return meta, records, trusted


class Journal:
    """The journal of one partial file, open for appending; `ranges` holds what is on disk."""

    def __init__(self, path: Path, meta: dict, ranges: Ranges):
        self.path = path
        self.meta = meta
        self.ranges = ranges
        self._lock = threading.Lock()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    @classmethod
    def create(cls, path: Path, meta: dict) -> Journal:
        meta = {"journal": VERSION, **meta}
        atomic_file.write_bytes(path, json.dumps(meta, sort_keys=True).encode() + b"\n")
        return cls(path, meta, Ranges())

    @classmethod
    def resume(cls, path: Path, data_fd: int, expect: dict) -> Journal | None:
        """The journal at `path` if it describes `expect` (same sha256 and size), with records
        after the last mark kept only where the partial still holds their bytes; compacted to
        one record per range and synced, so the next reopen starts from trusted ground."""
        got = read(path)
        if got is None:
            return None
        meta, records, trusted = got
        if any(meta.get(k) != expect.get(k) for k in ("sha256", "size")):
            return None
        ranges = Ranges()
        for i, (start, length, crc) in enumerate(records):
            if start + length > expect["size"]:
                return None
            if i >= trusted and zlib.crc32(os.pread(data_fd, length, start)) != crc:
                continue  # its bytes never reached the disk
            ranges.add(start, start + length)
        os.fsync(data_fd)  # what is about to be trusted is on the disk first
        body = b"".join(_record(a, b - a, 0) for a, b in ranges.pairs()) + _record(MARK, 0, 0)
        atomic_file.write_bytes(path, json.dumps(meta, sort_keys=True).encode() + b"\n" + body)
        return cls(path, meta, ranges)

    def record(self, start: int, data: bytes | memoryview) -> None:
        """Say that `data` now lies at `start` in the partial (already written there)."""
        rec = _record(start, len(data), zlib.crc32(data))
        with self._lock:
            os.write(self._fd, rec)
            self.ranges.add(start, start + len(data))

    def checkpoint(self, data_fd: int) -> None:
        """Make everything recorded so far survive a power cut: the data first, then the mark."""
        os.fsync(data_fd)
        with self._lock:
            os.write(self._fd, _record(MARK, 0, 0))
            os.fsync(self._fd)

    def done(self) -> int:
        with self._lock:
            return self.ranges.total()

    def gaps(self) -> list[tuple[int, int]]:
        with self._lock:
            return self.ranges.gaps(int(self.meta["size"]))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def progress_of(path: Path) -> tuple[dict, int] | None:
    """(meta, bytes recorded) of a journal, for listing partial downloads; unverified."""
    got = read(path)
    if got is None:
        return None
    meta, records, _ = got
    return meta, Ranges((s, s + n) for s, n, _ in records).total()
