"""A copy of a GGUF file with another chat template in its metadata.

Rewrites only the header: the key-value section is copied key by key (the
old template left out, the new one added), the tensor infos as they are, and
the tensor data from the original, re-aligned. gguf-py's GGUFReader parses
every token of a 262k vocabulary into Python objects first (~20 s on the
bundled model); this walk skips them in a second.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

TEMPLATE_KEY = "tokenizer.chat_template"
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value sizes
_STRING, _ARRAY = 8, 9


class _Walk:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        v = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self) -> str:
        n = self.take("Q")
        self.at += n
        return self.data[self.at - n:self.at].decode("utf-8")

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            sub, n = self.take("I"), self.take("Q")
            if sub in _FIXED:
                self.at += _FIXED[sub] * n
            else:
                for _ in range(n):
                    self.value(sub)
            return None
        n = _FIXED[kind]
        self.at += n
        return int.from_bytes(self.data[self.at - n:self.at], "little")  # read for general.alignment


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def with_chat_template(src: Path, dst: Path, template: str) -> Path:
    """`dst`: `src` with `template` as its chat template (replacing any it had)."""
    with open(src, "rb") as f:
        head = f.read(64 << 20)  # the header of a small model's file, vocabulary and all
    w = _Walk(head)
    magic, version, n_tensors, n_kv = w.take("4sIQQ")
    assert magic == b"GGUF", f"{src} is not a GGUF file"
    kept, align = [], 32
    for _ in range(n_kv):
        start = w.at
        key = w.string()
        kind = w.take("I")
        v = w.value(kind)
        if key == "general.alignment":
            align = v
        if key != TEMPLATE_KEY:
            kept.append(head[start:w.at])
    infos_at = w.at
    for _ in range(n_tensors):
        w.string()
        dims = w.take("I")
        w.at += 8 * dims + 4 + 8
    infos = head[infos_at:w.at]
    data_at = (w.at + align - 1) // align * align
    out = struct.pack("<4sIQQ", b"GGUF", version, n_tensors, len(kept) + 1)
    out += b"".join(kept) + _str(TEMPLATE_KEY) + struct.pack("<I", _STRING) + _str(template) + infos
    out += b"\0" * ((align - len(out) % align) % align)
    with open(src, "rb") as f, open(dst, "wb") as g:
        g.write(out)
        f.seek(data_at)
        shutil.copyfileobj(f, g, 16 << 20)
    return dst
