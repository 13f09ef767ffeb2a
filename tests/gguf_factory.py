"""Writes small GGUF files for the bad-input tests (valid headers, wrong content)."""

from __future__ import annotations

import struct
from pathlib import Path


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, value) -> bytes:
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", 8) + _str(value)
    if isinstance(value, bool):
        return _str(key) + struct.pack("<I", 7) + struct.pack("<?", value)
    if isinstance(value, int):
        return _str(key) + struct.pack("<I", 4) + struct.pack("<I", value)
    if isinstance(value, list):  # list of strings
        body = struct.pack("<IQ", 8, len(value)) + b"".join(_str(v) for v in value)
        return _str(key) + struct.pack("<I", 9) + body
    raise TypeError(value)


def write_gguf(path: Path, metadata: dict, tensors: list[tuple[str, tuple[int, ...]]]) -> Path:
    """F32 tensors, zero-filled, 32-byte aligned, GGUF v3."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for k, v in metadata.items():
        out += _kv(k, v)
    offset = 0
    sizes = []
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        out += _str(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", 0, offset)
        sizes.append(n * 4)
        offset += (n * 4 + 31) // 32 * 32
    out += b"\0" * ((32 - len(out) % 32) % 32)
    out += b"\0" * offset
    path.write_bytes(bytes(out))
    return path
