"""Probe results kept in the cache folder, one JSON object a probe, a figure per key.

A peak (memory bandwidth, the kernels' MAC rate) belongs to the machine and its
llama.cpp build, not to a run: measured once, then read back. A probe on a busy
machine reads low and never high, so a figure measured again keeps the higher of
the two. Without a cache folder, or when it cannot be written, the figure still
holds for the run.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

from app import atomic_file, paths, regular_files
from app.engine.library_choice import cpuinfo_line


def cpu_model() -> str:
    """The CPU's model name where platform.processor() gives none (Linux)."""
    line = cpuinfo_line("model name")
    return line.split(":", 1)[1].strip() if ":" in line else "unknown CPU"


def machine_key(threads: int) -> str:
    """What a figure is kept under: this CPU and the thread count it was measured with."""
    return f"{platform.machine()}|{platform.processor() or cpu_model()}|{threads}"


def _file(name: str) -> Path | None:
    try:
        return paths.cache_dir() / name
    except OSError:
        return None


def read(name: str, key: str) -> float | None:
    f = _file(name)
    known = (regular_files.read_json_object(f) if f is not None else None) or {}
    value = known.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def keep(name: str, key: str, value: float) -> float:
    """Keep a peak measured now; the peak that stands (the higher of it and the one kept)."""
    f = _file(name)
    if f is None:
        return value
    known = regular_files.read_json_object(f) or {}
    before = known.get(key)
    if isinstance(before, (int, float)) and before >= value:
        return float(before)
    known[key] = value
    try:
        atomic_file.write_text(f, json.dumps(known, indent=1))
    except OSError:
        pass  # the figure still holds for this run
    return value
