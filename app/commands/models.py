"""`llamadesk models`: what GGUF files LlamaDesk can see, and what they are."""

from __future__ import annotations

import argparse
import json
import sys

from app.engine.gguf import human_params, human_size
from app.engine.models import discover, ensure_default_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("models", help="list the models found",
                       description="List GGUF models in the models folders and any PATHs given.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="extra files or folders to look in")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    return p


def run(args: argparse.Namespace) -> int:
    ensure_default_model()
    found = discover(args.paths)
    if args.json:
        json.dump([m.to_json() for m in found], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not found:
        print("no models found")
        return 0
    rows = [("FILE", "SIZE", "ARCH", "QUANT", "PARAMS", "CONTEXT", "TEMPLATE", "PATH")]
    for m in found:
        if m.error:
            unusable = f"{m.path}  [unusable: {m.error}]"
            rows.append((m.file, human_size(m.size), "-", "-", "-", "-", "-", unusable))
            continue
        rows.append((m.file, human_size(m.size), m.architecture, m.quantization,
                     human_params(m.parameters) if m.parameters else "?",
                     str(m.context_length or "?"), "yes" if m.has_chat_template else "no", m.path))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    return 0
