"""`llamadesk serve`: the model behind an OpenAI-compatible server, online and batch API.

Everything that can be wrong with the setting is found before the model
loads, each as one line: the arguments, the key, the data folder and its
database (app.serve.batch_api_store), and the port, which is bound here first so
a port in use is said at once instead of after the load, in uvicorn's words.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import socket
from pathlib import Path

from app.commands.common import (
    add_model_args,
    add_speculative_args,
    check_range,
    load_options,
    note,
    speculative_mode,
)
from app.engine.sampling import INT32_MAX
from app.engine.stats import SPEC_LABELS
from app.errors import LlamaDeskError
from app.openai_compat.reasoning_params import FORMATS as REASONING_FORMATS
from app.remote.errors import EndpointConfigError
from app.remote.keys import key_from_env
from app.slots.context import MAX_SEQ, MAX_TOTAL_CTX, MIN_SLOT_CTX
from app.slots.engine import ONLINE_RESERVE

DEFAULT_PORT = 8765
DEFAULT_SLOTS = 4
DEFAULT_SLOT_CTX = 4096
DEFAULT_MODELS_MAX = 4  # llama-server's router's
LOAD_WAIT_S = 60.0
GRACE_S = 5  # seconds open requests get to finish after SIGTERM or Ctrl+C


class PortInUse(LlamaDeskError):
    """The address and port cannot be listened on."""


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
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a host name clients may reach the server by, besides the address it is bound "
                        "to (a reverse proxy's, a LAN name); repeatable")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web page origin (e.g. http://localhost:3000) whose requests are allowed, with "
                        "CORS; every other page is refused; repeatable")
    p.add_argument("--max-waiting", type=int, default=64, metavar="N",
                   help="online requests that may wait for a slot; past it, 429 (default 64)")
    p.add_argument("--reasoning-format", choices=REASONING_FORMATS, default="auto",
                   help="a thinking model's replies: its reasoning apart in reasoning_content (auto, "
                        "deepseek: the default) or all of it in content (none); a request's "
                        "reasoning_format overrides it")
    p.add_argument("--reasoning-budget", type=int, default=-1, metavar="N",
                   help="the most tokens a thinking model may reason before its answer is forced to start "
                        "(default -1: no limit; 0: answer at once); a request's reasoning_budget_tokens "
                        "overrides it")
    add_model_args(p, ctx=DEFAULT_SLOT_CTX, ctx_help="context length of each slot", several=True)
    add_speculative_args(p, "while a request decodes alone (no other slot busy, none waiting)")
    g = p.add_argument_group("several models (any of these, or --model more than once: each model is loaded "
                             "when a request names it)")
    g.add_argument("--models-dir", metavar="DIR",
                   help="serve every GGUF file in DIR (besides any --model); each is loaded when a request "
                        "names it")
    g.add_argument("--models-max", type=int, metavar="N",
                   help=f"models loaded at once; past it the least recently used idle one is unloaded "
                        f"(default {DEFAULT_MODELS_MAX})")
    g.add_argument("--models-idle-unload", type=float, metavar="SECONDS",
                   help="unload a model no request has used for SECONDS (default 0: never)")
    g.add_argument("--models-memory", type=float, metavar="MIB",
                   help="memory the loaded models may take together, in MiB (default: what this machine has "
                        "free when a model loads); a model that cannot fit is refused with 503")
    g.add_argument("--no-models-autoload", dest="models_autoload", action="store_const", const=False,
                   help="requests load no model: a model is loaded by POST /models/load (or a request's "
                        "?autoload=true), as llama-server's --no-models-autoload")
    g.add_argument("--models-load-wait", type=float, default=LOAD_WAIT_S, metavar="SECONDS",
                   help=f"how long a request waits for its model to load, then 503 (default {LOAD_WAIT_S:g})")
    return p


def several_models(args: argparse.Namespace) -> bool:
    """Whether these flags ask for the multi-model server (one --model with --models-idle-unload,
    say, is a model loaded on demand and let go when idle)."""
    return len(args.model or ()) > 1 or any(getattr(args, f) is not None for f in (
        "models_dir", "models_max", "models_idle_unload", "models_memory", "models_autoload"))


def model_paths(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The files a multi-model server serves: each --model, then DIR's *.gguf by name
    (multimodal projectors, mmproj*, left out), each once; the two apart, since a --model
    that cannot be read stops the server and a file of DIR only costs itself."""
    from app.engine.models import resolve_model

    given = args.model or ([None] if args.models_dir is None else [])  # None: the bundled model
    paths = [resolve_model(m) for m in given]
    found: list[Path] = []
    if args.models_dir is not None:
        d = Path(args.models_dir).expanduser()
        if not d.is_dir():
            raise ValueError(f"--models-dir {d} is not a folder")
        found = sorted(p for p in d.glob("*.gguf") if p.is_file() and not p.name.lower().startswith("mmproj"))
        if not found and not paths:
            raise ValueError(f"--models-dir {d} holds no .gguf file")
    seen: dict[str, Path] = {}
    for p in [*paths, *found]:
        if p.name in seen and seen[p.name].resolve() != p.resolve():
            raise ValueError(f"two models are named {p.name} ({seen[p.name]} and {p}); a request names a "
                             "model by its file name, so rename one")
        seen.setdefault(p.name, p)
    return [p for p in paths if seen[p.name] is p], [p for p in found if seen[p.name] is p]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound now (as uvicorn binds it), or PortInUse in one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        hint = "; is another server using it? pick another with --port" if e.errno == errno.EADDRINUSE else ""
        raise PortInUse(f"cannot listen on {host}:{port} ({e.strerror or e}){hint}") from None
    sock.set_inheritable(True)
    return sock


def _log_requests_to_terminal() -> None:
    """The server's own lines (one per request, refusals and errors) on its terminal, as an
    operator watching `llamadesk serve` expects; the log file has them too."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    serve_log = logging.getLogger("llamadesk.serve")
    serve_log.addHandler(handler)
    serve_log.setLevel(logging.INFO)


def _data_store():
    from app import paths
    from app.serve.batch_api_store import BatchStore, StoreError, reason

    try:
        folder = paths.data_dir() / "serve"
    except OSError as e:
        raise StoreError(f"the data folder cannot be made ({e.filename or ''}: {reason(e)})") from None
    return BatchStore(folder)


def run(args: argparse.Namespace) -> int:
    from app.engine.loader import load_model
    from app.engine.models import resolve_model
    from app.serve.api import create_app
    from app.serve.engine_host import ServeEngine
    from app.serve.guard import check_host_name, check_origin

    check_range("--port", args.port, 1, 65535)
    check_range("--parallel", args.parallel, 1, MAX_SEQ - ONLINE_RESERVE)
    check_range("--ctx", args.ctx, MIN_SLOT_CTX)
    check_range("--max-waiting", args.max_waiting, 1, 100_000)
    check_range("--reasoning-budget", args.reasoning_budget, -1, INT32_MAX)
    spec_mode = speculative_mode(args)
    if (args.parallel + ONLINE_RESERVE) * args.ctx > MAX_TOTAL_CTX:
        raise ValueError(f"--parallel {args.parallel} with --ctx {args.ctx} needs more than "
                         f"{MAX_TOTAL_CTX} tokens of context")
    hosts = [check_host_name(h) for h in args.allow_host]
    origins = [check_origin(o) for o in args.allow_origin]
    key = key_from_env(args.api_key_env) if args.api_key_env else None
    if key is None and not _loopback(args.host):
        raise EndpointConfigError(f"--host {args.host} is reachable from other machines: give an API key "
                                  "with --api-key-env VAR (or bind 127.0.0.1)")
    opts = load_options(args)
    slot_ctx, opts.n_ctx = opts.n_ctx, 256  # the chat context is unused here
    if several_models(args):
        if spec_mode is not None:
            raise ValueError("--speculative and --draft-model serve one --model")
        return _run_several(args, opts, slot_ctx, key, hosts, origins)
    path = resolve_model(args.model[0] if args.model else None)
    store = _data_store()
    try:
        sock = listen(args.host, args.port)
    except PortInUse:
        store.close()
        raise
    try:
        model = load_model(path, opts)
        try:
            if model.report.fallback:
                note(model.report.fallback)
            speculation = _speculation(spec_mode, args.draft_model, model, opts, slot_ctx)
            try:
                host = ServeEngine(model, args.parallel, slot_ctx, args.max_waiting, speculation=speculation)
            except BaseException:
                if speculation is not None:
                    speculation.close()
                raise
            try:
                model_id = path.name
                app = create_app(host, model_id, key, _defaults(args), store=store, bind=args.host,
                                 allow_hosts=hosts, allow_origins=origins,
                                 reasoning_format=args.reasoning_format)
                note(f"serving {model_id} on http://{args.host}:{args.port}/v1 · {args.parallel} slots of "
                     f"{host.slot_ctx} tokens · runs on {model.report.runs_on}"
                     + (f" · speculative: {SPEC_LABELS[spec_mode]}" if spec_mode else "")
                     + (" · API key required" if key else ""))
                _serve_forever(app, sock)
            finally:
                host.close()
                if speculation is not None:
                    speculation.close()  # after the engine thread, the draft's only user, has ended
        finally:
            model.close()
    finally:
        sock.close()  # the store stays open: a batch's thread may still be writing as the process ends
    return 0


def _defaults(args: argparse.Namespace):
    """Every request's settings before its body: the server's thinking budget (-1: none)."""
    from app.engine.sampling import GenerationSettings

    return GenerationSettings(think_budget=None if args.reasoning_budget < 0 else args.reasoning_budget)


def _speculation(mode: str | None, draft_path: str | None, model, opts, slot_ctx: int):
    """The engine's BatchSpeculation (None: off). A draft model is loaded as the model was, its
    context a slot's length; one whose vocabulary is not the model's is refused, saying how."""
    if mode is None:
        return None
    from dataclasses import replace

    from app.engine.draft import draft_for
    from app.engine.loader import load_model
    from app.engine.models import resolve_model
    from app.slots.speculation import BatchSpeculation

    if not model.rewinds:
        raise ValueError(f"--speculative: {model.header.path.name} is a recurrent model, whose cache cannot "
                         "drop the guesses a check rejects")
    draft = None
    if mode == "draft":
        assert draft_path is not None  # speculative_mode asks for one
        draft = draft_for(model, load_model(resolve_model(draft_path), replace(opts, n_ctx=slot_ctx)))
    return BatchSpeculation(mode, draft)


def _serve_forever(app, sock: socket.socket) -> None:
    import uvicorn

    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    _log_requests_to_terminal()
    # The log is on the disk that fills: a line that cannot be written is lost, not a
    # traceback on the terminal for every line after it.
    logging.raiseExceptions = False
    # SIGTERM ends the server however its requests stand: streams still open after GRACE_S are
    # cut, or one that never ends (a client reading forever) would keep it running.
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=GRACE_S)
    uvicorn.Server(config).run(sockets=[sock])


def _probe_now(opts) -> None:
    """The CPU's memory bandwidth, which every engine's gauges read, probed before the first
    request instead of during it (once per machine, then read from the cache folder): on a
    machine that never measured it, the first model's cold load would take 2 s longer."""
    from app.engine import backend
    from app.engine.utilization import peak_for

    if opts.n_gpu_layers == 0 or not backend.gpu_offload_supported():
        peak_for(opts.threads())


def _run_several(args: argparse.Namespace, opts, slot_ctx: int, key, hosts, origins) -> int:
    """Several models behind one door (app.serve.models_api), each loaded when first asked for."""
    from app.engine.gguf import human_size
    from app.serve.models_api import ServeSettings, create_models_app
    from app.serve.pool import ModelPool

    args.models_max = DEFAULT_MODELS_MAX if args.models_max is None else args.models_max
    args.models_idle_unload = args.models_idle_unload or 0.0
    check_range("--models-max", args.models_max, 1, 1000)
    for flag, value in (("--models-idle-unload", args.models_idle_unload),
                        ("--models-load-wait", args.models_load_wait),
                        ("--models-memory", args.models_memory)):
        if value is not None and not 0 <= value < 1e9:
            raise ValueError(f"{flag} must be a number of at least 0, got {value}")
    settings = ServeSettings(opts, args.parallel, slot_ctx, args.max_waiting, _defaults(args),
                             args.reasoning_format)
    named, found = model_paths(args)
    specs = [settings.spec(p) for p in named] + [settings.found(p) for p in found]
    unusable = [s for s in specs if s.error is not None]
    if len(unusable) == len(specs):
        why = "; ".join(f"{s.id} ({s.error})" for s in unusable)
        raise ValueError(f"--models-dir {Path(args.models_dir).expanduser()} holds no model that can be "
                         f"served: {why}")
    _probe_now(opts)
    memory = None if args.models_memory is None else int(args.models_memory * 2**20)
    pool = ModelPool(specs, settings.build, args.models_max, args.models_idle_unload, memory)
    store = _data_store()
    try:
        sock = listen(args.host, args.port)
    except PortInUse:
        store.close()
        pool.close()
        raise
    try:
        app = create_models_app(pool, settings, key, store=store, bind=args.host, allow_hosts=hosts,
                                allow_origins=origins, load_wait_s=args.models_load_wait,
                                autoload=args.models_autoload is not False)
        served = [s for s in specs if s.error is None]
        listed = ", ".join(f"{s.id} ({human_size(s.need)})" for s in served)
        note(f"serving {len(served)} model{'s' * (len(served) != 1)} on http://{args.host}:{args.port}/v1, "
             f"each loaded when first asked for (at most {args.models_max} at once): {listed} · "
             f"{args.parallel} slots of {slot_ctx} tokens each" + (" · API key required" if key else ""))
        for s in unusable:
            note(f"not serving {s.path}: {s.error} (listed in GET /models with the reason)")
        _serve_forever(app, sock)
    finally:
        pool.close()
        sock.close()
    return 0
