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
    p.add_argument("--tokens", type=int, default=256, metavar="N", help="tokens to decode per run")
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
                      help="`llamadesk serve` under 1, 4, 8 and 16 streaming clients against llama.cpp's "
                           "llama-server (same model, slots and context), and online TTFT during a batch")
    mode.add_argument("--structured", action="store_true",
                      help="replies held to 44 JSON schemas: valid share, mask and compile time, decode "
                           "ratio, LlamaDesk's LLGuidance path against llama.cpp's GBNF in the same run")
    mode.add_argument("--fit", action="store_true",
                      help="predicted (app.hub.fit, from the header) against measured resident memory after "
                           "load, for the model and a llama-quantize Q8_0 copy at 2048 and 16384 tokens")
    p.add_argument("--markdown", action="store_true",
                   help="with --gui: ask for a reply full of code blocks, lists and tables (an earlier "
                        "turn shows the model one) instead of a story, and count what it held")
    p.add_argument("--messages", type=int, default=10_000, metavar="N", help="with --store (default 10000)")
    add_model_args(p)
    add_endpoint_args(p)  # --endpoint: the remote server's TTFT, decode and throughput at 1, 4, 8 at once
    return p


def run(args: argparse.Namespace) -> int:
    if args.tokens < 2:
        raise ValueError(f"--tokens must be at least 2, got {args.tokens}")
    if args.markdown and not args.gui:
        raise ValueError("--markdown chooses the reply of --gui: give --gui too")
    result = _bench(args)
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    else:
        for k, v in result.items():
            print(f"{k:>24}: {v}")
    return 0


def _bench(args: argparse.Namespace) -> dict:
    """The one benchmark the (mutually exclusive) mode flags chose."""
    check_range("--messages", args.messages, 1, 1_000_000)
    check_range("--tokens", args.tokens, 2, 1_000_000)
    check_range("--rounds", args.rounds, 1, 1000)
    endpoint = endpoint_from_args(args)
    if endpoint is not None:
        if (args.store or args.batch or args.quality or args.cold_start or args.gui or args.serve or args.fit
                or args.structured):
            raise ValueError("--endpoint measures the server on its own: give no other benchmark mode")
        from app.bench.remote import run_remote_bench

        return run_remote_bench(endpoint, args.remote_model, args.remote_format, args.tokens, args.rounds)
    if args.structured:
        from app.bench.structured import run_structured_bench

        return run_structured_bench(args.model, load_options(args))
    if args.fit:
        from app.bench.fit import run_fit_bench

        return run_fit_bench(args.model)
    if args.serve:
        from app.bench.serve import run_serve_bench

        return run_serve_bench(args.model, tokens=min(args.tokens, 64), threads=args.threads,
                               flash_attn=args.flash_attn)
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

    return run_engine_bench(args.model, load_options(args), args.tokens, args.rounds)
