"""Arguments shared by the subcommands that load a model or sample text."""

from __future__ import annotations

import argparse
import math
import sys

from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings


def add_model_args(p: argparse.ArgumentParser, ctx: int = 4096, ctx_help: str = "context length") -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", metavar="PATH", help="GGUF file (default: bundled Gemma 3 270M)")
    g.add_argument("--ctx", type=int, default=ctx, metavar="N", help=f"{ctx_help} (default {ctx})")
    g.add_argument("--gpu-layers", type=int, default=-1, metavar="N",
                   help="layers to offload to the GPU; -1 = all, 0 = CPU only (default -1)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads (default: all cores)")
    g.add_argument("--flash-attn", action="store_true", help="use flash attention")


def add_sampling_args(p: argparse.ArgumentParser, max_tokens: int = 512) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--max-tokens", type=int, default=max_tokens, metavar="N")
    g.add_argument("--temperature", type=float, default=0.8, metavar="T")
    g.add_argument("--top-p", type=float, default=0.95, metavar="P")
    g.add_argument("--top-k", type=int, default=40, metavar="K")
    g.add_argument("--min-p", type=float, default=0.05, metavar="P")
    g.add_argument("--repeat-penalty", type=float, default=1.1, metavar="R")
    g.add_argument("--seed", type=int, default=None, metavar="S", help="fixed seed for reproducible output")
    g.add_argument("--dry", type=float, default=0.0, metavar="M", dest="dry_multiplier",
                   help="DRY multiplier: penalize repeating earlier text (0 = off, the default)")
    g.add_argument("--no-preamble", dest="preamble", action="store_false",
                   help="send a model without a chat template the bare transcript, without "
                        "LlamaDesk's framing and example exchanges")


# llama.cpp takes these as 32-bit C ints; ctypes would wrap a larger one silently
# (--ctx 4294967808 became a 512-token context) instead of refusing it.
INT32_MAX = 2**31 - 1
MAX_THREADS = 512  # ggml's GGML_MAX_N_THREADS: its thread pool holds no more
FLOAT_FLAGS = {"temperature": "--temperature", "top_p": "--top-p", "min_p": "--min-p",
               "repeat_penalty": "--repeat-penalty", "dry_multiplier": "--dry"}


def check_range(flag: str, value: int, lo: int, hi: int = INT32_MAX) -> None:
    if not lo <= value <= hi:
        raise ValueError(f"{flag} must be between {lo} and {hi}, got {value}")


def load_options(args: argparse.Namespace) -> LoadOptions:
    check_range("--ctx", args.ctx, 16)
    check_range("--gpu-layers", args.gpu_layers, -1)
    if args.threads is not None:
        check_range("--threads", args.threads, 1, MAX_THREADS)
    return LoadOptions(n_ctx=args.ctx, n_gpu_layers=args.gpu_layers, n_threads=args.threads,
                       flash_attn=args.flash_attn)


def sampling(args: argparse.Namespace) -> GenerationSettings:
    for name, flag in FLOAT_FLAGS.items():  # argparse's float() takes "nan" and "inf"
        if not math.isfinite(getattr(args, name)):
            raise ValueError(f"{flag} must be a finite number, got {getattr(args, name)}")
    s = GenerationSettings(
        max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
        top_k=args.top_k, min_p=args.min_p, repeat_penalty=args.repeat_penalty, seed=args.seed,
        dry_multiplier=args.dry_multiplier, preamble=args.preamble,
    )
    s.validate()
    return s


def note(msg: str) -> None:
    print(f"llamadesk: {msg}", file=sys.stderr)
