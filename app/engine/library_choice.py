"""Which llama.cpp build the engine loads, chosen before llama_cpp is first imported.

pip compiles llama-cpp-python from the untouched sdist. On a CPU with AMX that build's AMX
kernel crashes at the first prompt (packaging/llama_patches.py says why), so with it the
engine loads weights without llama.cpp's extra buffers at all. packaging/build-llama-tools.sh
compiles the same sources with LlamaDesk's fixes and keeps libllama beside the tools, marked
with MARKER. Where that folder exists for this llama-cpp-python and this CPU, the engine loads
it instead (llama-cpp-python's LLAMA_CPP_LIB_PATH), so the app runs the AMX kernels the C++
tools run. A library the user named, a frozen bundle and LLAMADESK_LLAMA_LIB=pip keep theirs.

No llama_cpp import here: importing it loads the library this module is choosing; and no
ctypes (app.engine.amx has it), which app.slots.scheduler's tests keep out of its imports.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

MARKER = "LLAMADESK-PATCHES"  # packaging/llama_patches.py writes it beside the libraries
OPT_OUT = "LLAMADESK_LLAMA_LIB"  # "pip": keep llama-cpp-python's own build


def cpuinfo_line(field: str) -> str:
    """The first line of /proc/cpuinfo naming `field` ("flags", "model name"), newline kept;
    "" where there is no such file (not Linux) or line."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field):
                    return line
    except OSError:
        pass
    return ""


def _flags_line() -> str:
    return cpuinfo_line("flags")


def cpu_has_amx() -> bool:
    return "amx_int8" in _flags_line().split()


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i << 24
        for _ in range(8):
            c = ((c << 1) ^ 0x04C11DB7) if c & 0x80000000 else (c << 1)
        table.append(c & 0xFFFFFFFF)
    return table


def cksum(data: bytes) -> int:
    """POSIX cksum, as the packaging scripts key their caches by CPU (`... | cksum`)."""
    table, crc = _crc_table(), 0
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ b]
    n = len(data)
    while n:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ (n & 0xFF)]
        n >>= 8
    return ~crc & 0xFFFFFFFF


def patched_tools(env: dict[str, str] | None = None) -> Path | None:
    """The folder of llama.cpp built here with LlamaDesk's fixes for this llama-cpp-python and
    this CPU (packaging/build-llama-tools.sh), or None if it is not built."""
    env = dict(os.environ if env is None else env)
    named = env.get("LLAMADESK_LLAMA_TOOLS")
    if named:
        return Path(named) if (Path(named) / MARKER).is_file() else None
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return None
    flags = _flags_line()
    if not flags:
        return None
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llamadesk" / "llama-tools"
    found = sorted(cache.glob(f"{version}-{cksum(flags.encode())}-*/bin/{MARKER}"),
                   key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else None


def choose() -> Path | None:
    """Point llama-cpp-python at the fixed build where it matters and exists; the folder chosen."""
    if "llama_cpp" in sys.modules or os.environ.get("LLAMA_CPP_LIB_PATH") or getattr(sys, "frozen", False):
        return None
    if os.environ.get(OPT_OUT, "").lower() == "pip" or not cpu_has_amx():
        return None
    tools = patched_tools()
    if tools is not None and (tools / "libllama.so").exists():
        os.environ["LLAMA_CPP_LIB_PATH"] = str(tools)
        return tools
    return None
