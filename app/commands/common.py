"""Arguments shared by the subcommands that load a model or sample text."""

from __future__ import annotations

import argparse
import math
import sys

from app.chat.engines import EngineTarget
from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import DEFAULT_STALL_S, Endpoint
from app.remote.errors import EndpointConfigError
from app.remote.keys import key_from_env, with_saved_key


def add_model_args(p: argparse.ArgumentParser, ctx: int = 4096, ctx_help: str = "context length",
                   several: bool = False) -> None:
    """`several`: --model may be repeated (a list, or None)."""
    g = p.add_argument_group("model")
    if several:
        g.add_argument("--model", metavar="PATH", action="append",
                       help="GGUF file (default: bundled Gemma 3 270M); repeat it to serve several models")
    else:
        g.add_argument("--model", metavar="PATH", help="GGUF file (default: bundled Gemma 3 270M)")
    g.add_argument("--ctx", type=int, default=ctx, metavar="N", help=f"{ctx_help} (default {ctx})")
    g.add_argument("--gpu-layers", type=int, default=-1, metavar="N",
                   help="layers to offload to the GPU; -1 = all, 0 = CPU only (default -1)")
    g.add_argument("--threads", type=int, default=None, metavar="N", help="CPU threads (default: all cores)")
    g.add_argument("--flash-attn", action="store_true", help="use flash attention")


def add_endpoint_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote engine (an OpenAI-compatible server instead of a local model)")
    g.add_argument("--endpoint", metavar="URL",
                   help="the server's OpenAI base URL, e.g. http://127.0.0.1:8080/v1 (llama-server, vLLM, "
                        "Ollama, ...); nothing leaves this machine without it")
    g.add_argument("--remote-model", metavar="NAME", help="model id on the server (default: its only one)")
    g.add_argument("--api-key-env", metavar="VAR",
                   help="environment variable holding the API key (default: the keyring's, if one was saved)")
    g.add_argument("--remote-format", choices=("chat", "transcript"), default="chat",
                   help="chat: messages to /chat/completions, the server applies the model's template "
                        "(default); transcript: LlamaDesk's plain transcript to /completions, for a base "
                        "model without a chat template")
    g.add_argument("--stall-timeout", type=float, default=DEFAULT_STALL_S, metavar="S",
                   help=f"give up when the server sends nothing for S seconds (default {DEFAULT_STALL_S:g})")


def endpoint_from_args(args: argparse.Namespace) -> Endpoint | None:
    """The endpoint the flags name, or None for the local engine; the key never from a flag,
    so it stays out of shell history and the process list."""
    if args.endpoint is None:
        for flag in ("remote_model", "api_key_env"):
            if getattr(args, flag, None) is not None:
                raise EndpointConfigError(f"--{flag.replace('_', '-')} needs --endpoint")
        return None
    if getattr(args, "model", None) is not None:
        raise EndpointConfigError("--model and --endpoint name two different engines: give one")
    ep = Endpoint.parse(args.endpoint, stall_s=args.stall_timeout)  # the URL is refused first
    if args.api_key_env:
        ep = Endpoint.parse(ep.base_url, key_from_env(args.api_key_env), ep.stall_s)
    return with_saved_key(ep)


def engine_target(args: argparse.Namespace, endpoint: Endpoint | None) -> EngineTarget:
    """What open_engine opens for these flags: the --endpoint's server, or the --model file."""
    if endpoint is not None:
        return EngineTarget(endpoint=endpoint, remote_model=args.remote_model,
                            prompt_format=args.remote_format)
    return EngineTarget(args.model, load_options(args))


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


def add_speculative_args(p: argparse.ArgumentParser, when: str) -> None:
    """--speculative and --draft-model, as ask and serve take them; `when` says when it guesses."""
    p.add_argument("--speculative", choices=("off", "ngram", "draft"), default=None,
                   help=f"{when}, guess the next tokens and check them in one pass: ngram from the "
                        "text's own earlier tokens (pays on rewrites, fixes and edits), draft with "
                        "--draft-model; it steps aside by itself when it does not pay (default off)")
    p.add_argument("--draft-model", metavar="FILE",
                   help="a smaller GGUF with the model's vocabulary that guesses for it (implies "
                        "--speculative draft)")


def speculative_mode(args: argparse.Namespace) -> str | None:
    """--speculative and --draft-model as one mode (None: off); a draft file implies "draft"."""
    mode = args.speculative or ("draft" if args.draft_model else "off")
    if mode == "draft" and not args.draft_model:
        raise ValueError("--speculative draft needs --draft-model FILE")
    if args.draft_model and mode != "draft":
        raise ValueError(f"--draft-model guesses with --speculative draft, not {mode}")
    return None if mode == "off" else mode


def note(msg: str) -> None:
    print(f"llamadesk: {msg}", file=sys.stderr)
