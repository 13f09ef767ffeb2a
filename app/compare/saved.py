"""Finished comparisons kept under the data folder, one JSON record each, to reopen later.

The record is report.to_json's, the same one `compare --json` prints and the
exports carry, so a reopened comparison shows exactly what was measured.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app import atomic_file, paths


def folder() -> Path:
    d = paths.data_dir() / "comparisons"
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(record: dict) -> Path:
    """Written whole or not at all (a temporary file renamed into place)."""
    name = time.strftime("%Y%m%d-%H%M%S", time.localtime(record.get("started_at") or time.time()))
    dest = folder() / f"comparison-{name}.json"
    n = 1
    while dest.exists():
        n += 1
        dest = folder() / f"comparison-{name}-{n}.json"
    atomic_file.write_text(dest, json.dumps(record, ensure_ascii=False, indent=1))
    return dest


def listing() -> list[tuple[Path, str]]:
    """(file, one line naming it) for each saved comparison, newest first; unreadable ones say so."""
    out = []
    for p in sorted(folder().glob("comparison-*.json"), reverse=True):
        try:
            rec = json.loads(p.read_text(encoding="utf-8"))
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec["started_at"]))
            names = ", ".join(r["target"] for r in rec["rows"])
            out.append((p, f"{when} · {names}"))
        except (OSError, ValueError, KeyError, TypeError) as e:
            out.append((p, f"{p.name} (cannot be read: {type(e).__name__})"))
    return out


def load(p: Path) -> dict:
    """ValueError naming the file when it is not a comparison record."""
    try:
        rec = json.loads(Path(p).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{p}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise ValueError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("rows"), list):
        raise ValueError(f"{p}: not a saved comparison")
    return rec
