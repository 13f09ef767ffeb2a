"""`llamadesk models`: what GGUF files LlamaDesk can see, and what they are; `models search` finds
GGUFs on the Hugging Face Hub with their fit, `models delete` removes pulled ones (and partial
downloads) and says what space came back.

`search` and `delete` are words in the PATH position, not subparsers, so that today's
`llamadesk models [PATH...]` keeps working as it is; a folder named "search" is ./search.
"""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.common import endpoint_from_args, note
from app.engine.gguf import human_params, human_size
from app.engine.models import discover, ensure_default_model


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("models", help="list the models found; search the Hub; delete pulled ones",
                       description="List GGUF models in the models folders and any PATHs given (and partial "
                                   "downloads). `models search TEXT`: GGUF repositories on the Hugging Face "
                                   "Hub, each file with its quantization, size and fit here. `models delete "
                                   "REPO[:QUANT|FILE]...`: remove pulled models; `--partials`: every partial "
                                   "download.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="extra files or folders to look in")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    h = p.add_argument_group("search and delete")
    h.add_argument("--limit", type=int, default=None, metavar="N", help="search: repositories (default 10)")
    h.add_argument("--ctx", type=int, default=None, metavar="N",
                   help="search: context length the fit is judged at (default 4096)")
    h.add_argument("--partials", action="store_true",
                   help="delete: remove partial downloads (all of them, or those of the REPOs named)")
    g = p.add_argument_group("remote engine")
    g.add_argument("--endpoint", metavar="URL",
                   help="list the models an OpenAI-compatible server offers instead")
    g.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    return p


def _remote(args: argparse.Namespace) -> int:
    from app.remote import transport as remote_http
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
    action = args.paths[0] if args.paths and args.paths[0] in ("search", "delete") else None
    for flag in ("limit", "ctx"):
        if getattr(args, flag) is not None and action != "search":
            raise ValueError(f"--{flag} belongs to `llamadesk models search`")
    if args.partials and action != "delete":
        raise ValueError("--partials belongs to `llamadesk models delete`")
    if action is not None:
        if args.endpoint is not None or args.api_key_env is not None:
            raise ValueError(f"`models {action}` works on the Hugging Face Hub: no --endpoint")
        return _search(args) if action == "search" else _delete(args)
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
        _print_partials()
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
    _print_partials()
    return 0


def _print_partials() -> None:
    """Partial downloads after the table: they take space and are no model (yet)."""
    from app.hub.library import partials

    got = partials()
    if got:
        print(f"\npartial downloads ({len(got)}): resume with `llamadesk pull REPO:FILE`, "
              "remove with `llamadesk models delete --partials`")
    for p in got:
        share = f" ({100 * p.done / p.size:.0f}%)" if p.size else ""
        print(f"  {p.repo}:{p.name}  {human_size(p.done)} of {human_size(p.size)}{share}  "
              f"{human_size(p.on_disk)} on disk  {p.path}")


def _search(args: argparse.Namespace) -> int:
    from app.commands.common import check_range
    from app.hub.names import shown
    from app.hub.search import search

    text = " ".join(args.paths[1:])
    limit, ctx = args.limit or 10, args.ctx or 4096
    check_range("--limit", limit, 1, 100)
    check_range("--ctx", ctx, 16)
    found = search(text, limit=limit, n_ctx=ctx)
    if args.json:
        json.dump([r.to_json() for r in found], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not found:
        print(f"no GGUF repositories match {text!r}")
    for r in found:
        extra = ", gated: needs HF_TOKEN and the licence accepted" if r.gated else ""
        print(f"{shown(r.repo)}  ({r.downloads or 0:,} downloads{extra})")
        if r.note:
            print(f"  ({shown(r.note)})")
        for f in r.files:
            needs = f"needs {human_size(f.needs)}" if f.needs else ""
            parts = f"  [{f.parts} parts]" if f.parts > 1 else ""
            print(f"  {f.quant:<8} {human_size(f.size):>9}  {f.fit:<9} {needs:<16} {f.name}{parts}")
    if found:
        note(f"fit at a {ctx:,}-token context; pull one with `llamadesk pull REPO:QUANT`")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from app.hub import library
    from app.hub.pull import parse_spec
    from app.hub.quant import selects

    specs = [parse_spec(s) for s in args.paths[1:]]
    if not specs and not args.partials:
        raise ValueError("name what to delete: REPO[:QUANT|FILE]..., or --partials")

    def wanted(repo: str, name: str) -> bool:
        if not specs:
            return True
        return any(repo == r and selects(name, sel) for r, sel in specs)

    if args.partials:
        gone = [p for p in library.partials() if wanted(p.repo, p.name)]
        freed = sum(library.remove_partial(p) for p in gone)
        for p in gone:
            print(f"removed the partial {p.repo}:{p.name}")
        print(f"{len(gone)} partial download{'s' * (len(gone) != 1)} removed, {human_size(freed)} freed")
        return 0
    files = [d for d in library.downloaded() if wanted(d.repo, d.name)]
    if not files:
        raise ValueError(f"no pulled model matches {' '.join(args.paths[1:])} (see `llamadesk models`)")
    freed = library.delete(files)
    for d in files:
        print(f"deleted {d.repo}:{d.name} ({human_size(d.size)})")
    print(f"{human_size(freed)} freed")
    return 0
