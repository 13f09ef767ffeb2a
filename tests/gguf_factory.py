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


def _vocab_only(path):
    return write_gguf(path, {"general.architecture": "gemma3", "tokenizer.ggml.model": "llama",
                             "tokenizer.ggml.tokens": ["<pad>", "<eos>", "a", "b"]}, [])


def _unknown_arch(path):
    return write_gguf(path, {"general.architecture": "notamodel", "general.name": "x"},
                      [("token_embd.weight", (8, 4))])


def make_bad_model(kind, tmp_path, model_path):
    """A model file broken in the named way (a key of BAD_MODEL_CASES), under tmp_path."""
    p = tmp_path / f"{kind}.gguf"
    if kind == "missing":
        return tmp_path / "nope.gguf"
    if kind == "directory":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "not_gguf":
        p.write_text("this is a text file, not a model\n")
    elif kind == "truncated":
        with open(model_path, "rb") as f:
            p.write_bytes(f.read(50_000_000))
    elif kind == "truncated_header":
        with open(model_path, "rb") as f:
            p.write_bytes(f.read(200))
    elif kind == "no_tensors":
        _vocab_only(p)
    elif kind == "unknown_arch":
        _unknown_arch(p)
    return p


# Each kind of broken model file, and the words its one-line error must contain.
BAD_MODEL_CASES = {
    "missing": "no such file",
    "directory": "is a directory",
    "empty": "is empty",
    "not_gguf": "not a GGUF file",
    "truncated": "truncated GGUF",
    "truncated_header": "truncated GGUF",
    "no_tensors": "has no tensors",
    "unknown_arch": "unsupported model architecture 'notamodel'",
}
