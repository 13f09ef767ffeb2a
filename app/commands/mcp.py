"""`llamadesk mcp`: the MCP servers in mcp.json, what each offers, and what its tools cost.

`list` starts every enabled server (as a conversation would), says how each is doing
in one line, lists its tools, and measures the prompt tokens its tool definitions take
with the model's own tokenizer: one server with dozens of tools can take a small
model's whole context before anything is said, and this is where that shows.
`add`, `remove` and `import` edit LlamaDesk's own mcp.json; another app's file is
only ever read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.common import note
from app.errors import LlamaDeskError
from app.mcp.config import (
    DEFAULT_TIMEOUT_S,
    McpConfig,
    ServerConfig,
    config_path,
    importable,
    load_config,
    read_foreign,
    save_config,
    server_from_json,
)
from app.mcp.hub import McpHub, ServerState


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("mcp", help="MCP servers: list them with their tools and token cost; add, remove, "
                                   "import",
                       description="Tools from MCP servers, kept in mcp.json in LlamaDesk's config folder "
                                   "(Claude Desktop's format).")
    acts = p.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    ls = acts.add_parser("list", help="each server's status, tools and the prompt tokens its tools take")
    ls.add_argument("--json", action="store_true", help="print a JSON object")
    ls.add_argument("--model", metavar="PATH",
                    help="count tokens with this GGUF's tokenizer (default: bundled Gemma 3 270M)")
    ls.add_argument("--timeout", type=float, default=30.0, metavar="S",
                    help="seconds each server has to start (default 30)")
    add = acts.add_parser("add", help="add a server (or replace the one of that name)",
                          usage="llamadesk mcp add NAME (--url URL | -- COMMAND [ARG...]) [options]")
    add.add_argument("name", metavar="NAME")
    _add_options(add)
    add.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]",
                     help="the program that runs a stdio server, after --")
    rm = acts.add_parser("remove", help="remove a server from mcp.json")
    rm.add_argument("name", metavar="NAME")
    imp = acts.add_parser("import", help="copy the servers of Claude Desktop's or LM Studio's file "
                                         "(read only)")
    imp.add_argument("file", nargs="?", metavar="FILE",
                     help="the file to read (default: the first one found)")
    return p


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="a streamable-HTTP server's URL (one ending in /sse: an SSE server)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="environment for a stdio server")
    p.add_argument("--header", action="append", default=[], metavar="K=V",
                   help="HTTP header for a URL server")
    p.add_argument("--trusted", action="store_true", help="run its tools without asking")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"seconds a call may take (default {DEFAULT_TIMEOUT_S:g})")


def _split_add(args: argparse.Namespace) -> list[str]:
    """The command after `--`; the options written between NAME and `--` are read into `args`
    (argparse hands everything after NAME over as one remainder)."""
    rest = list(args.rest)
    if "--" in rest:
        cut = rest.index("--")
        options, command = rest[:cut], rest[cut + 1:]
    elif rest and not rest[0].startswith("-"):  # argparse drops a `--` written right after NAME
        options, command = [], rest
    else:
        options, command = rest, []
    if options:
        again = argparse.ArgumentParser(prog="llamadesk mcp add", add_help=False)
        _add_options(again)
        more, unknown = again.parse_known_args(options)
        if unknown:
            raise ValueError(f"llamadesk mcp add: {' '.join(unknown)}: put the server's command after --")
        for key in ("url", "trusted"):
            setattr(args, key, getattr(more, key) or getattr(args, key))
        if more.timeout != DEFAULT_TIMEOUT_S:
            args.timeout = more.timeout
        args.env, args.header = args.env + more.env, args.header + more.header
    return command


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} {item!r}: give it as KEY=VALUE")
        out[key] = value
    return out


def _add(args: argparse.Namespace) -> int:
    command = _split_add(args)
    if args.url and command:
        raise ValueError("give --url or a command after --, not both")
    if not args.url and not command:
        raise ValueError("give the server's --url, or its command after -- (e.g. -- uvx mcp-server-time)")
    entry: dict = {"timeout": args.timeout, "trusted": args.trusted}
    if args.url:
        if args.env:
            raise ValueError("--env is for a server started here (a command), not a URL")
        entry |= {"url": args.url, "headers": _pairs(args.header, "--header")}
    else:
        if args.header:
            raise ValueError("--header is for a URL server, not a command")
        entry |= {"command": command[0], "args": command[1:], "env": _pairs(args.env, "--env")}
    server = server_from_json(args.name, entry)
    cfg = load_config()
    replaced = cfg.get(args.name) is not None
    save_config(cfg.with_server(server))
    note(f"{'replaced' if replaced else 'added'} {args.name} ({server.transport}: {server.target}) "
         f"in {config_path()}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    cfg = load_config()
    if cfg.get(args.name) is None:
        names = ", ".join(s.name for s in cfg.servers) or "none"
        raise ValueError(f"no server {args.name!r} in {config_path()} (there: {names})")
    save_config(cfg.without(args.name))
    note(f"removed {args.name} from {config_path()}")
    return 0


def _import(args: argparse.Namespace) -> int:
    if args.file:
        source, path = "the file", Path(args.file).expanduser()
    else:
        found = importable()
        if not found:
            raise ValueError("no Claude Desktop or LM Studio MCP file found here; name one: mcp import FILE")
        source, path = found[0]
    theirs = read_foreign(path)
    cfg = load_config()
    added = [s for s in theirs if cfg.get(s.name) is None]
    kept = [s.name for s in theirs if cfg.get(s.name) is not None]
    for s in added:
        cfg = cfg.with_server(s)
    if added:
        save_config(cfg)
    note(f"imported {len(added)} server(s) from {source} ({path}) into {config_path()}: "
         f"{', '.join(s.name for s in added) or 'none'}")
    if kept:
        note(f"kept LlamaDesk's own {', '.join(kept)} (same name; remove it first to take theirs)")
    return 0


def _counter(model: str | None):
    """The model's tokenizer, its vocabulary alone loaded (cheap: no weights)."""
    import llama_cpp

    from app.engine.models import describe, resolve_model

    path = resolve_model(model)
    describe(path)  # a file that is not a GGUF model is said as LlamaDesk says it, not as llama.cpp does
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def _costs(cfg: McpConfig, states: dict[str, ServerState], model: str | None) -> dict[str, int | None]:
    from app.chat.tool_cost import definitions_tokens

    defs = {s.name: [t.definition() for t in states[s.name].tools if t.name not in s.disabled_tools]
            for s in cfg.servers if s.name in states}
    if not any(defs.values()):
        return {name: 0 for name in defs}
    try:
        count = _counter(model)
    except (LlamaDeskError, OSError, ValueError) as e:
        note(f"token costs not counted: {e}")
        return {name: None for name in defs}
    costs: dict[str, int | None] = {}
    for name, d in defs.items():
        try:
            costs[name] = definitions_tokens(count, d)
        except LlamaDeskError as e:
            note(f"{name}: {e}")
            costs[name] = None
    return costs


def _row(s: ServerConfig, st: ServerState, tokens: int | None) -> dict:
    return {"name": s.name, "enabled": s.enabled, "trusted": s.trusted, "transport": s.transport,
            "target": s.target, "status": st.status, "error": st.error, "tokens": tokens,
            "tools": [{"name": t.name, "description": t.description,
                       "enabled": t.name not in s.disabled_tools} for t in st.tools]}


def _print(rows: list[dict], total: int | None) -> None:
    for r in rows:
        if not r["enabled"]:
            status = "turned off"
        elif r["status"] == "ready":
            on = sum(t["enabled"] for t in r["tools"])
            cost = "tokens not counted" if r["tokens"] is None else f"{r['tokens']:,} tokens"
            status = f"ready, {on} of {len(r['tools'])} tools on, {cost}"
        else:
            status = f"{r['status']}: {r['error']}" if r["error"] else r["status"]
        print(f"{r['name']}  [{r['transport']}{', trusted' if r['trusted'] else ''}]  {status}")
        print(f"    {r['target']}")
        for t in r["tools"]:
            desc = " ".join(t["description"].split())
            desc = desc if len(desc) <= 100 else desc[:99] + "…"
            print(f"    {'-' if not t['enabled'] else ' '} {t['name']}  {desc}".rstrip())
    if total is not None and rows:
        print(f"tool definitions of the servers on: {total:,} prompt tokens")


def _list(args: argparse.Namespace) -> int:
    path = config_path()
    cfg = load_config()
    hub = McpHub(cfg)
    try:
        states = hub.ensure([s.name for s in cfg.enabled()], timeout=args.timeout)
    finally:
        hub.close()
    costs = _costs(cfg, states, args.model)
    rows = [_row(s, states.get(s.name) or ServerState(s.name, "stopped"), costs.get(s.name))
            for s in cfg.servers]
    counted = [r["tokens"] for r in rows if r["enabled"] and r["status"] == "ready"]
    total = None if None in counted else sum(counted)
    if args.json:
        json.dump({"config": str(path), "servers": rows, "tokens": total}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if not cfg.servers:
        print(f"no MCP servers in {path}; add one: llamadesk mcp add NAME -- COMMAND [ARG...]")
        return 0
    _print(rows, total)
    return 0


def run(args: argparse.Namespace) -> int:
    return {"list": _list, "add": _add, "remove": _remove, "import": _import}[args.mcp_action](args)
