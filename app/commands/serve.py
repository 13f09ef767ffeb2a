"""`llamadesk serve`: the model behind an OpenAI-compatible server, online and batch API."""

from __future__ import annotations

import argparse
import ipaddress
import logging

from app.batch.context import MAX_SEQ, MAX_TOTAL_CTX, MIN_SLOT_CTX
from app.batch.engine import ONLINE_RESERVE
from app.commands.common import add_model_args, check_range, load_options, note
from app.remote.errors import EndpointConfigError
from app.remote.keys import key_from_env

DEFAULT_PORT = 8765
DEFAULT_SLOTS = 4
DEFAULT_SLOT_CTX = 4096


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve the model as an OpenAI-compatible API (online and batch)",
                       description="Serve the model on an OpenAI-compatible HTTP API: /v1/chat/completions, "
                                   "/v1/completions, /v1/models, the Batch API (/v1/files, /v1/batches), "
                                   "/metrics and /health. Online requests go ahead of batch work.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other "
                                                        "needs --api-key-env)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--parallel", type=int, default=DEFAULT_SLOTS, metavar="N",
                   help=f"requests decoded together (default {DEFAULT_SLOTS}; one more slot is kept "
                        "for online requests)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key clients "
                                                        "must send (Authorization: Bearer KEY)")
    p.add_argument("--max-waiting", type=int, default=64, metavar="N",
                   help="online requests that may wait for a slot; past it, 429 (default 64)")
    add_model_args(p, ctx=DEFAULT_SLOT_CTX, ctx_help="context length of each slot")
    return p


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from app import paths
    from app.engine.loader import load_model
    from app.engine.models import resolve_model
    from app.serve.api import create_app
    from app.serve.engine_host import ServeEngine

    check_range("--port", args.port, 1, 65535)
    check_range("--parallel", args.parallel, 1, MAX_SEQ - ONLINE_RESERVE)
    check_range("--ctx", args.ctx, MIN_SLOT_CTX)
    check_range("--max-waiting", args.max_waiting, 1, 100_000)
    if (args.parallel + ONLINE_RESERVE) * args.ctx > MAX_TOTAL_CTX:
        raise ValueError(f"--parallel {args.parallel} with --ctx {args.ctx} needs more than "
                         f"{MAX_TOTAL_CTX} tokens of context")
    key = key_from_env(args.api_key_env) if args.api_key_env else None
    if key is None and not _loopback(args.host):
        raise EndpointConfigError(f"--host {args.host} is reachable from other machines: give an API key "
                                  "with --api-key-env VAR (or bind 127.0.0.1)")
    opts = load_options(args)
    slot_ctx, opts.n_ctx = opts.n_ctx, 256  # the chat context is unused here
    path = resolve_model(args.model)
    model = load_model(path, opts)
    try:
        if model.report.fallback:
            note(model.report.fallback)
        host = ServeEngine(model, args.parallel, slot_ctx, args.max_waiting)
        try:
            model_id = path.name
            app = create_app(host, model_id, key, data_dir=paths.data_dir() / "serve")
            note(f"serving {model_id} on http://{args.host}:{args.port}/v1 · {args.parallel} slots of "
                 f"{host.slot_ctx} tokens · runs on {model.report.runs_on}"
                 + (" · API key required" if key else ""))
            logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
            uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
        finally:
            host.close()
    finally:
        model.close()
    return 0
