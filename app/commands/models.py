"""`llamadesk models`: what GGUF files LlamaDesk can see, and what they are."""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.common import endpoint_from_args, note
from app.engine.gguf import human_params, human_size
from app.engine.models import discover, ensure_default_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("models", help="list the models found",
                       description="List GGUF models in the models folders and any PATHs given.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="extra files or folders to look in")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    g = p.add_argument_group("remote engine")
    g.add_argument("--endpoint", metavar="URL",
                   help="list the models an OpenAI-compatible server offers instead")
    g.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    return p


def _remote(args: argparse.Namespace) -> int:
    from app.remote import http as remote_http
    from app.remote.server import probe

    if args.paths:
        raise ValueError("give PATHs or --endpoint, not both")
    args.stall_timeout, args.remote_model, args.model = 30.0, None, None
    ep = endpoint_from_args(args)
    with remote_http.client(ep) as http:
        info = probe(http, ep)
    if args.json:
        json.dump({"server": info.kind, "version": info.version, "base_url": ep.base_url,
                   "models": [{"id": m.id, "n_ctx": m.n_ctx or info.n_ctx} for m in info.models]},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    note(f"{info.kind}{' ' + info.version if info.version else ''} at {ep.base_url}")
    if not info.models:
        print("no models found")
    for m in info.models:
        ctx = m.n_ctx or info.n_ctx
        print(f"{m.id}" + (f"  ctx {ctx}" if ctx else ""))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.endpoint is not None:
        return _remote(args)
    if args.api_key_env is not None:
        raise ValueError("--api-key-env needs --endpoint")
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
