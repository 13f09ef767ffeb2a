"""Reads a GGUF header in pure Python, without loading the model.

Two uses: model discovery must describe dozens of files in the picker without
paying for a llama.cpp load each, and bad files must get a precise reason
(truncated, no tensors, not GGUF) before llama.cpp turns them into a bare
"failed to load model".
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.errors import ModelFileError

MAGIC = b"GGUF"

# GGUF metadata value types.
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i",
    6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_STRING, _ARRAY = 8, 9

# ggml tensor type -> (elements per block, bytes per block); lets us compute
# where the tensor data must end and so detect a truncated download.
_TYPE_SIZES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
    8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
    13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66),
    17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
    22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
    27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54),
    35: (256, 66), 39: (32, 17),
}

# llama_ftype values (general.file_type) -> the names people search for.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S",
    15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS",
    20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
    25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE",
}


@dataclass
class GGUFHeader:
    path: Path
    version: int
    size: int
    metadata: dict = field(default_factory=dict)
    tensor_count: int = 0
    parameters: int = 0
    tensors: dict = field(default_factory=dict)  # name -> (elements, bytes), from the tensor table
    tensor_types: dict = field(default_factory=dict)  # name -> ggml type id (enum ggml_type)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name") or self.path.stem)

    @property
    def quantization(self) -> str:
        ft = self.metadata.get("general.file_type")
        return FILE_TYPES.get(ft, f"type {ft}") if ft is not None else "unknown"

    @property
    def context_length(self) -> int | None:
        v = self.metadata.get(f"{self.architecture}.context_length")
        return int(v) if v is not None else None

    @property
    def chat_template(self) -> str | None:
        t = self.metadata.get("tokenizer.chat_template")
        return t if isinstance(t, str) and t.strip() else None


class _Truncated(Exception):
    pass


class HeaderNeedsMore(Exception):
    """The bytes given end inside the header: read a longer prefix and parse again.

    A ranged request for a remote file's first megabytes cannot know how long
    the header is (the vocabulary alone can be several MB), so the caller grows
    the prefix until this stops being raised.
    """

    def __init__(self, have: int):
        self.have = have
        super().__init__(f"the header runs past the first {have} bytes")


class _Reader:
    """Cursor over an mmap; big arrays (the vocabulary) are skipped, not built."""

    def __init__(self, buf: mmap.mmap | bytes):
        self.buf = buf
        self.pos = 0
        self.n = len(buf)

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > self.n:
            raise _Truncated
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return v

    def string(self) -> str:
        length = self.unpack("<Q")
        if self.pos + length > self.n:
            raise _Truncated
        s = bytes(self.buf[self.pos:self.pos + length]).decode("utf-8", "replace")
        self.pos += length
        return s

    def skip_string(self) -> None:
        length = self.unpack("<Q")
        self.pos += length
        if self.pos > self.n:
            raise _Truncated

    def value(self, vtype: int, keep_arrays: bool):
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype = self.unpack("<I")
            count = self.unpack("<Q")
            if itype in _SCALARS:
                size = struct.calcsize(_SCALARS[itype])
                self.pos += size * count
                if self.pos > self.n:
                    raise _Truncated
                return f"<array of {count}>"
            if itype == _STRING and not keep_arrays:
                for _ in range(count):
                    self.skip_string()
                return f"<array of {count}>"
            return [self.value(itype, keep_arrays) for _ in range(count)]
        raise ValueError(f"unknown metadata type {vtype}")


def read_header(path: str | Path) -> GGUFHeader:
    """Parse and sanity-check a GGUF file; raise ModelFileError with the reason."""
    p = Path(path).expanduser()
    try:
        if not p.exists():
            raise ModelFileError(p, "no such file")
        if p.is_dir():
            raise ModelFileError(p, "is a directory, not a GGUF file")
        size = p.stat().st_size
        fh = open(p, "rb")
    except PermissionError:
        raise ModelFileError(p, "permission denied: the file is not readable") from None
    except OSError as e:
        raise ModelFileError(p, f"cannot be read ({e.strerror})") from None
    with fh:
        if size == 0:
            raise ModelFileError(p, "is empty (0 bytes)")
        try:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise ModelFileError(p, f"cannot be read ({e})") from None
        with buf:
            return _parse(p, buf, size)


def header_from_prefix(prefix: bytes, size: int, name: str | Path) -> GGUFHeader:
    """Parse the header of a `size`-byte GGUF from its first bytes (a ranged download's prefix).

    Raises HeaderNeedsMore when `prefix` ends inside the header and the file goes on,
    ModelFileError when the header itself is bad; `name` stands for the path in both."""
    if len(prefix) < min(size, 24):
        raise HeaderNeedsMore(len(prefix))
    return _parse(Path(name), prefix, size)


def _parse(p: Path, buf, size: int) -> GGUFHeader:
    if bytes(buf[:4]) != MAGIC:
        raise ModelFileError(p, "not a GGUF file (wrong magic bytes)")
    r = _Reader(buf)
    r.pos = 4
    try:
        version = r.unpack("<I")
        if version not in (2, 3):
            raise ModelFileError(p, f"unsupported GGUF version {version}")
        n_tensors = r.unpack("<Q")
        n_kv = r.unpack("<Q")
        meta: dict = {}
        for _ in range(n_kv):
            key = r.string()
            vtype = r.unpack("<I")
            meta[key] = r.value(vtype, keep_arrays=False)
        header = GGUFHeader(p, version, size, meta, n_tensors)
        if n_tensors == 0:
            raise ModelFileError(p, "has no tensors (a vocabulary-only GGUF cannot generate text)")
        data_end = 0
        params = 0
        tensors = {}
        types = {}
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.unpack("<I")
            n_elems = 1
            for _ in range(n_dims):
                n_elems *= r.unpack("<Q")
            ttype = r.unpack("<I")
            offset = r.unpack("<Q")
            params += n_elems
            blk, nbytes = _TYPE_SIZES.get(ttype, (1, 0))
            tensors[name] = (n_elems, n_elems // blk * nbytes)
            types[name] = ttype
            data_end = max(data_end, offset + n_elems // blk * nbytes)
        align = int(meta.get("general.alignment", 32)) or 32
        data_start = (r.pos + align - 1) // align * align
    except _Truncated:
        if len(buf) < size:  # a prefix: the rest of the file is not here yet
            raise HeaderNeedsMore(len(buf)) from None
        raise ModelFileError(
            p, f"truncated GGUF: the header runs past the end of the file ({size} bytes)"
        ) from None
    except (ValueError, UnicodeDecodeError, OverflowError) as e:
        raise ModelFileError(p, f"corrupt GGUF header ({e})") from None
    if data_start + data_end > size:
        raise ModelFileError(
            p, f"truncated GGUF: tensor data needs {data_start + data_end} bytes, file has {size}"
        )
    header.parameters = params
    header.tensors = tensors
    header.tensor_types = types
    return header


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def human_params(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.0f}M"
    return str(n)


__all__ = ["GGUFHeader", "HeaderNeedsMore", "header_from_prefix", "human_params", "human_size", "read_header"]
