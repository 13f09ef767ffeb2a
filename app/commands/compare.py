"""`llamadesk compare`: the same prompts on 2 to 6 targets, one at a time, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.chat.reply import PROMPT_FORMATS
from app.commands.common import add_sampling_args, note, sampling
from app.remote.endpoint import DEFAULT_STALL_S


class _InOrder(argparse.Action):
    """--model, --endpoint, --set and the endpoint options kept in the order typed: each
    applies to the target just before it, which separate append lists would forget."""

    def __call__(self, parser, ns, value, option=None):
        items = list(getattr(ns, "order", None) or [])
        items.append((self.dest, value))
        ns.order = items


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("compare", help="compare models, settings and endpoints on the same prompts",
                       description="Run PROMPT (or --prompts FILE) on each target, one at a time, "
                                   "--repeat times each, and print medians side by side.")
    p.add_argument("prompt", nargs="?", help="the prompt (or --prompts FILE)")
    p.add_argument("--model", dest="model", action=_InOrder, metavar="PATH", help="a GGUF file (a target)")
    p.add_argument("--endpoint", dest="endpoint", action=_InOrder, metavar="URL",
                   help="an OpenAI-compatible server (a target)")
    p.add_argument("--set", dest="set", action=_InOrder, metavar="KEY=VALUE",
                   help="a setting of the target named just before it: threads, ctx, gpu_layers, "
                        "flash_attn, kv, batch, ubatch, temperature, top_p, top_k, min_p, repeat_penalty, "
                        "seed, max_tokens")
    g = p.add_argument_group("endpoint options (each applies to the --endpoint just before it)")
    g.add_argument("--remote-model", dest="remote_model", action=_InOrder, metavar="NAME",
                   help="model id on the server (default: its only one)")
    g.add_argument("--api-key-env", dest="api_key_env", action=_InOrder, metavar="VAR",
                   help="environment variable holding the server's API key (default: the keyring's, "
                        "if one was saved)")
    g.add_argument("--remote-format", dest="remote_format", action=_InOrder, choices=PROMPT_FORMATS,
                   help="chat (default): messages to /chat/completions; transcript: LlamaDesk's plain "
                        "transcript to /completions, for a base model without a chat template")
    g.add_argument("--stall-timeout", dest="stall_timeout", action=_InOrder, type=float, metavar="S",
                   help=f"give up when the server sends nothing for S seconds (default {DEFAULT_STALL_S:g})")
    p.add_argument("--prompts", metavar="FILE", help="prompts, one per line (or batch JSONL)")
    p.add_argument("--repeat", type=int, default=3, metavar="N",
                   help="runs per prompt and target (default 3)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the warm-up reply")
    p.add_argument("--json", action="store_true", help='print one JSON object {"rows": [...]}')
    p.add_argument("-o", "--export", metavar="FILE", help="also write FILE: .md, .csv or .json")
    add_sampling_args(p, max_tokens=128)
    p.set_defaults(order=None, temperature=0.0)
    return p


ENDPOINT_OPTIONS = ("remote_model", "api_key_env", "remote_format", "stall_timeout")


def _targets(args: argparse.Namespace):
    from app.compare.targets import Target, apply_endpoint_option, apply_set, check_targets
    from app.remote.endpoint import Endpoint

    targets: list[Target] = []
    for kind, value in args.order or ():
        flag = "--" + kind.replace("_", "-")
        if kind in ("set", *ENDPOINT_OPTIONS) and not targets:
            raise ValueError(f"{flag} {value}: name a target (--model or --endpoint) before it")
        if kind == "set":
            apply_set(targets[-1], value)
        elif kind in ENDPOINT_OPTIONS:
            apply_endpoint_option(targets[-1], flag, value)
        elif kind == "model":
            targets.append(Target("model", value))
        else:
            targets.append(Target.for_endpoint(Endpoint.parse(value)))
    check_targets(targets)
    return targets


def _prompts(args: argparse.Namespace) -> list[str]:
    if args.prompts and args.prompt:
        raise ValueError("give PROMPT or --prompts FILE, not both")
    if args.prompts:
        from app.batch_jsonl.requests import read_input

        items = read_input(args.prompts, sampling(args))
        bad = [it for it in items if it.error]
        if bad:
            raise ValueError(f"{args.prompts}: line {bad[0].line}: {bad[0].error}")
        return [it.request.messages[-1].content for it in items]
    if not args.prompt or not args.prompt.strip():
        raise ValueError("the prompt is empty")
    return [args.prompt]


def run(args: argparse.Namespace) -> int:
    from app.commands.ask import generate_interruptibly
    from app.compare.report import EXPORTERS, to_json, to_table
    from app.compare.run import run_comparison
    from app.compare.targets import OPTION_WORDS

    if not 1 <= args.repeat <= 100:
        raise ValueError(f"--repeat must be between 1 and 100, got {args.repeat}")
    targets, prompts, settings = _targets(args), _prompts(args), sampling(args)
    out = Path(args.export) if args.export else None
    if out is not None and out.suffix.lower() not in EXPORTERS:
        raise ValueError(f"{out}: the export must end in .md, .csv or .json")

    def progress(label: str, done: int, total: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\x1b[2K{done}/{total} · {label}")
            sys.stderr.flush()

    cmp = generate_interruptibly(lambda cancel: run_comparison(targets, prompts, settings, args.repeat,
                                                              args.warmup, progress, cancel, OPTION_WORDS))
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
    from app.compare import saved

    try:  # kept first, for the Compare window's "Earlier" list: a failed export then loses nothing
        kept = saved.save(to_json(cmp))
    except OSError as e:
        kept = None
        note(f"could not keep the comparison in the history: {e}")
    export_failed = False
    if out is not None:
        from app.history.errors import ExportError
        from app.history.export.writer import write_text as write_export

        try:  # the exports' own writer: atomic for a file, straight through for a pipe or a device
            write_export(out, EXPORTERS[out.suffix.lower()](cmp))
            note(f"wrote {out}")
        except ExportError as e:
            export_failed = True
            note(f"{e}" + (f"; the comparison is kept in {kept}" if kept else ""))
    if args.json:
        json.dump(to_json(cmp), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(to_table(cmp))
    failed = [r for r in cmp.rows if r.error and not r.runs]
    for r in failed:
        named = r.target.where and r.error.startswith(r.target.where)
        note(r.error if named else f"{r.target.label}: {r.error}")
    if cmp.cancelled:
        note("interrupted: the table holds what finished")
        return 130
    if len(failed) == len(cmp.rows):
        note("every target failed: nothing was measured")
        return 1
    return 1 if export_failed else 0
