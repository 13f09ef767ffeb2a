"""`llamadesk bench`: the engine's speed against a raw llama.cpp loop, in one run."""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.common import (
    add_endpoint_args,
    add_model_args,
    check_range,
    endpoint_from_args,
    load_options,
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("bench", help="measure decode speed and prefix reuse",
                       description="Decode the same prompt through the engine and a raw llama-cpp-python "
                                   "loop, and measure TTFT with a cached prefix.")
    p.add_argument("--tokens", type=int, default=None, metavar="N",
                   help="tokens to decode per run (default 256; 128 with --speculative)")
    p.add_argument("--rounds", type=int, default=5, metavar="N", help="alternating rounds (median taken)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    mode = p.add_mutually_exclusive_group()  # one benchmark per run; none given: the engine's
    mode.add_argument("--gui", action="store_true",
                      help="stream one long reply (at least 1,000 tokens) through the real window, "
                           "offscreen, and measure delivery, GUI stalls and paint cost")
    mode.add_argument("--store", action="store_true",
                      help="time opening a conversation of --messages messages from the history database")
    mode.add_argument("--batch", action="store_true",
                      help="decode 32 prompts online one after another, then with continuous batching; "
                           "print batch_speedup and the slot count")
    mode.add_argument("--quality", action="store_true",
                      help="answer 42 everyday prompts and 21 two-turn chats with the bundled base model "
                           "and classify each reply (empty, echo, role marker, copy, ok), with the "
                           "defaults and as before the base-model work")
    mode.add_argument("--cold-start", action="store_true",
                      help="first-reply TTFT in fresh processes after a ~1,500-token system prompt saved in "
                           "the prompt cache by an earlier one, against no system prompt (3 alternating "
                           "rounds; a private cache folder); print cold_start_ttft_ratio")
    mode.add_argument("--serve", action="store_true",
                      help="a serving benchmark in vLLM's terms (TTFT, TPOT, ITL, E2EL at p50/p90/p99, "
                           "throughput, goodput): `llamadesk serve` against llama.cpp's llama-server (same "
                           "model, slots and context) on a chat and a completion load, and online TTFT "
                           "during a batch; with --endpoint, any OpenAI-compatible server")
    mode.add_argument("--structured", action="store_true",
                      help="replies held to 44 JSON schemas: valid share, mask and compile time, decode "
                           "ratio, LlamaDesk's LLGuidance path against llama.cpp's GBNF in the same run")
    mode.add_argument("--speculative", action="store_true",
                      help="editing prompts (rewrites, typo fixes, reformatting, code edits) and free chat, "
                           "each answered with and without prompt-lookup speculation: speedup, guesses "
                           "kept, agreement with the plain reply (--tokens each, default here 128)")
    mode.add_argument("--branches", action="store_true",
                      help="a ~3,000-token conversation as a tree: TTFT after regenerating, switching to a "
                           "sibling and back, editing an early question and a restart (the disk prompt "
                           "cache), each against a cold prefill of the same prompt (3 repeats, median)")
    mode.add_argument("--fit", action="store_true",
                      help="predicted (app.hub.fit, from the header) against measured resident memory after "
                           "load, for the model and a llama-quantize Q8_0 copy at 2048 and 16384 tokens")
    mode.add_argument("--docs", action="store_true",
                      help="index Python's HTML documentation (Debian's python3-doc, or --docs-dir): index "
                           "time, size, BM25 latency, recall@5 and MRR on 32 questions for BM25, the bundled "
                           "model's vectors and hybrid, and the prefill cost of the top-5 passages")
    mode.add_argument("--kernels", action="store_true",
                      help="this CPU's llama.cpp builds side by side (pip's without repacking, the AMX-free "
                           "repacked build, the fixed AMX build), the engine's figures beside llama-bench's: "
                           "pp512, tg128 at 1 and 2 threads, batch 32 x 64, a 9-row check, TTFT of 2,000 "
                           "tokens")
    p.add_argument("--docs-dir", metavar="DIR", help="with --docs: the folder to index "
                                                     "(default /usr/share/doc/python3/html)")
    p.add_argument("--docs-pool", type=int, default=10, metavar="N",
                   help="with --docs: each question's BM25 top N passages' pages form the pool that is "
                        "embedded for the vector comparison (default 10)")
    p.add_argument("--no-vectors", action="store_true", help="with --docs: BM25 only, no model loaded")
    p.add_argument("--tokenizer", choices=("porter unicode61", "trigram"), default="porter unicode61",
                   help="with --docs: FTS5's tokenizer for the index (default 'porter unicode61')")
    p.add_argument("--markdown", action="store_true",
                   help="with --gui: ask for a reply full of code blocks, lists and tables (an earlier "
                        "turn shows the model one) instead of a story, and count what it held")
    p.add_argument("--messages", type=int, default=10_000, metavar="N", help="with --store (default 10000)")
    p.add_argument("--no-reuse", action="store_true",
                   help="the engine's benchmark without its cached-prefix TTFT part (a ~1,800-token prefill "
                        "per round: minutes on a slow device such as Mesa's lavapipe)")
    _add_serve_args(p)
    add_model_args(p)
    add_endpoint_args(p)  # --endpoint: the remote server's TTFT, decode and throughput at 1, 4, 8 at once
    return p


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("with --serve")
    g.add_argument("--concurrency", type=_counts, default=None, metavar="N,N,...",
                   help="closed-loop clients, one run each (default 1,4,8,16; none with --request-rate "
                        "alone)")
    g.add_argument("--request-rate", type=_rates, default=(), metavar="R,R,...",
                   help="requests per second, Poisson arrivals, one run each ('inf' needs --max-concurrency)")
    g.add_argument("--max-concurrency", type=int, metavar="N", help="cap on requests in flight in a rate run")
    g.add_argument("--burstiness", type=float, default=1.0, metavar="F",
                   help="gamma shape of the arrival gaps: 1 is Poisson, lower is burstier (default 1)")
    g.add_argument("--num-prompts", type=int, metavar="N",
                   help="requests a run (default: 2 a client, at least 4; 8 s of arrivals at a rate)")
    g.add_argument("--dataset", choices=("chat", "completion"), default="chat",
                   help="with --endpoint: a shared system prompt and a different question each (chat, "
                        "default), or the same raw text to /completions; without it both run")
    g.add_argument("--goodput", nargs="+", metavar="NAME:MS",
                   help="SLOs for goodput, as vLLM's: ttft:MS, tpot:MS, e2el:MS")
    g.add_argument("--parallel", type=int, default=16, metavar="N",
                   help="slots of both servers, without --endpoint (default 16)")
    g.add_argument("--result-dir", metavar="DIR",
                   help="with --endpoint: also write each run to DIR, as `vllm bench serve --save-result` "
                        "does")


def _counts(text: str) -> tuple[int, ...]:
    try:
        got = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers, comma separated") from None
    if not got or any(n < 1 or n > 4096 for n in got):
        raise argparse.ArgumentTypeError(f"{text!r}: each must be 1 to 4096")
    return got


def _rates(text: str) -> tuple[float, ...]:
    try:
        got = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers (or inf), comma separated") from None
    if not got or any(not r > 0 for r in got):
        raise argparse.ArgumentTypeError(f"{text!r}: each rate must be above 0")
    return got


def run(args: argparse.Namespace) -> int:
    if args.tokens is None:
        args.tokens = 128 if args.speculative else 256
    if args.tokens < 2:
        raise ValueError(f"--tokens must be at least 2, got {args.tokens}")
    if args.markdown and not args.gui:
        raise ValueError("--markdown chooses the reply of --gui: give --gui too")
    result = _bench(args)
    if args.serve:
        _print_serve(result, args.json)
    elif args.branches and not args.json:
        from app.bench.branches import table

        print(table(result))
    elif args.kernels and not args.json:
        from app.bench.kernels import table as kernels_table

        print(kernels_table(result))
    elif args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_lines(result)
    return 0


def _print_lines(result: dict) -> None:
    """One `key: value` line each. The engine bench's (the one with a roofline) names its token
    profile's figures one a line under `token_profile.` and ends with the roofline in words."""
    if "binding_roof" not in result:
        for k, v in result.items():
            print(f"{k:>24}: {v}")
        return
    for k, v in _flat(result):
        print(f"{k:>24}: {v}")
    print(f"{'roofline':>24}: {roofline_words(result)}")


def _flat(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield prefix + k, v


def roofline_words(r: dict) -> str:
    """'memory 41% · compute 23% of roofs (memory binds), ceiling 108 tok/s'."""
    mem = f"memory {100 * r['memory_utilization']:.0f}%"
    if r.get("compute_utilization") is None:
        return f"{mem} of its roof; compute roof not measured"
    return (f"{mem} · compute {100 * r['compute_utilization']:.0f}% of roofs ({r['binding_roof']} binds), "
            f"ceiling {r['roofline_ceiling_tok_s']:.0f} tok/s")


def _bench(args: argparse.Namespace) -> dict:
    """The one benchmark the (mutually exclusive) mode flags chose."""
    check_range("--messages", args.messages, 1, 1_000_000)
    check_range("--tokens", args.tokens, 2, 1_000_000)
    check_range("--rounds", args.rounds, 1, 1000)
    endpoint = endpoint_from_args(args)
    if args.serve:
        return _serve(args, endpoint)
    if args.docs:
        from app.bench.docs import run_docs_bench

        check_range("--docs-pool", args.docs_pool, 1, 1000)
        return run_docs_bench(args.docs_dir, args.model, load_options(args), args.docs_pool,
                              not args.no_vectors, args.rounds, args.tokenizer)
    if endpoint is not None:
        if (args.store or args.batch or args.quality or args.cold_start or args.gui or args.fit
                or args.structured or args.speculative or args.branches or args.kernels):
            raise ValueError("--endpoint measures the server on its own: give no other benchmark mode")
        from app.bench.remote import run_remote_bench

        return run_remote_bench(endpoint, args.remote_model, args.remote_format, args.tokens, args.rounds)
    if args.structured:
        from app.bench.structured import run_structured_bench

        return run_structured_bench(args.model, load_options(args))
    if args.speculative:
        from app.bench.speculative import run_speculative_bench

        return run_speculative_bench(args.model, load_options(args), args.tokens)
    if args.branches:
        from app.bench.branches import run_branches_bench

        return run_branches_bench(args.model, load_options(args))
    if args.kernels:
        from app.bench.kernels import run_kernels_bench
        from app.engine.models import resolve_model

        return run_kernels_bench(str(resolve_model(args.model)))
    if args.fit:
        from app.bench.fit import run_fit_bench

        return run_fit_bench(args.model)
    if args.store:
        from app.bench.store import run as run_store_bench

        return run_store_bench(args.messages, args.rounds)
    if args.batch:
        from app.bench.batch import run_batch_bench

        return run_batch_bench(args.model, load_options(args))
    if args.quality:
        from app.bench.quality import run_quality_bench

        return run_quality_bench(args.model, load_options(args))
    if args.cold_start:
        from app.bench.cold_start import run_cold_start_bench

        return run_cold_start_bench(args.model, load_options(args))
    if args.gui:
        from app.bench.gui import run_gui_bench

        return run_gui_bench(args.model, load_options(args), max(args.tokens, 1024), markdown=args.markdown)
    from app.bench.engine import run_engine_bench

    if args.no_reuse:
        return run_engine_bench(args.model, load_options(args), args.tokens, args.rounds, reuse=False)
    return run_engine_bench(args.model, load_options(args), args.tokens, args.rounds)


def _serve(args: argparse.Namespace, endpoint) -> dict:
    """--serve: the two servers compared, or (--endpoint) the sweep against that one server."""
    from app.bench.serving import parse_goodput

    goodput = parse_goodput(args.goodput)
    check_range("--parallel", args.parallel, 1, 255)
    if args.max_concurrency is not None:
        check_range("--max-concurrency", args.max_concurrency, 1, 4096)
    if args.num_prompts is not None:
        check_range("--num-prompts", args.num_prompts, 1, 1_000_000)
    if not args.burstiness > 0:
        raise ValueError(f"--burstiness must be above 0, got {args.burstiness}")
    if any(r == float("inf") for r in args.request_rate) and args.max_concurrency is None:
        raise ValueError("--request-rate inf sends every request at once: give --max-concurrency too")
    levels = args.concurrency or (() if args.request_rate else (1, 4, 8, 16))
    if endpoint is None:
        from app.bench.serve import run_serve_bench

        if not levels:
            raise ValueError("without --endpoint the comparison needs concurrency levels: give --concurrency")
        return run_serve_bench(args.model, slots=args.parallel, tokens=min(args.tokens, 64),
                               threads=args.threads, flash_attn=args.flash_attn, levels=levels,
                               rates=args.request_rate, goodput=goodput)
    from app.bench.serve_load import run_endpoint_serve

    return run_endpoint_serve(endpoint.base_url, endpoint.api_key, args.remote_model, args.dataset,
                              min(args.tokens, 4096), levels, args.request_rate,
                              max_concurrency=args.max_concurrency, num_prompts=args.num_prompts,
                              goodput=goodput, burstiness=args.burstiness, result_dir=args.result_dir)


def _print_serve(result: dict, as_json: bool) -> None:
    """The comparison: one JSON object (or its tables). Against an endpoint: one vLLM result
    object a line (JSON Lines: a single run is exactly one `vllm bench serve` result file)."""
    from app.bench.serve_report import comparison, table

    runs = result.get("runs")
    if as_json:
        for obj in runs if runs is not None else [result]:
            json.dump(obj, sys.stdout)
            sys.stdout.write("\n")
    elif runs is not None:
        print(table(runs, f"{result['endpoint']} · {result['model']} · {result['dataset']} · TPOT excludes "
                          "the first token (vLLM's definition)"))
    else:
        print(comparison(result))
