"""`llamadesk pull REPO[:QUANT or FILE]`: download a GGUF from the Hugging Face Hub (or HF_ENDPOINT's
mirror), resumably, verified against the Hub's sha256 before it becomes a model.

The bar is tqdm's: huggingface_hub already depends on it, so it costs no new package, and
its byte units, rate and time left are what a download bar needs. It draws only on a
terminal; elsewhere (a log, a pipe) the pull says one line when it ends. stdout gets the
model's path and nothing else, so `llamadesk ask --model "$(llamadesk pull ...)"` works.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from app.commands.common import check_range, note
from app.engine.gguf import human_size

if TYPE_CHECKING:
    from tqdm import tqdm


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("pull", help="download a GGUF model from the Hugging Face Hub",
                       description="Download a GGUF from the Hugging Face Hub into the models folder: "
                                   "Q4_K_M unless a quantization or file is named. Ctrl+C pauses (the "
                                   "partial is kept); the same command resumes at the byte it stopped. "
                                   "HF_TOKEN (or the keyring) for gated repositories; HF_ENDPOINT for a "
                                   "mirror.")
    p.add_argument("spec", metavar="REPO[:QUANT|FILE]", help="e.g. unsloth/gemma-3-1b-it-GGUF:Q8_0")
    p.add_argument("--revision", default="main", metavar="REV", help="branch, tag or commit (default main)")
    p.add_argument("--parts", type=int, default=4, metavar="N",
                   help="ranged parts fetched at once where the server allows it (default 4)")
    p.add_argument("--ctx", type=int, default=4096, metavar="N",
                   help="context length the memory fit is judged at (default 4096)")
    p.add_argument("--gpu-layers", type=int, default=-1, metavar="N",
                   help="layers you will offload, for the fit (-1 = all, where a GPU is used; default -1)")
    p.add_argument("--cancel", action="store_true", help="remove the partial download of REPO[:QUANT|FILE]")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    return p


def run(args: argparse.Namespace) -> int:
    from app.hub import pull

    if args.cancel:
        return _cancel(args)
    check_range("--parts", args.parts, 1, 16)
    check_range("--ctx", args.ctx, 16)
    check_range("--gpu-layers", args.gpu_layers, -1)
    from app.hub.ranged import client

    with client() as http:
        p = pull.plan(http, args.spec, args.revision, args.ctx, args.gpu_layers)
        f = p.file
        if p.installed is not None:
            note(f"{f.repo}/{f.name} is already downloaded")
            return _done(args, {"path": str(p.installed), "fetched": 0, "already": True})
        note(f"{f.repo}/{f.name}  {f.quant}  {human_size(f.size)}  commit {f.commit[:10]}")
        if p.fit is not None:
            note(p.fit.summary())
        if p.done:
            note(f"resuming: {human_size(p.done)} of {human_size(f.size)} already here")
        bar = _Bar(f.name)
        try:
            out = pull.run(http, p, args.parts, bar.update)
        except KeyboardInterrupt:  # between two steps; in the transfer it arrives as Paused
            return _paused(args, bar, None, f.size)
        except pull.Paused as e:
            return _paused(args, bar, e.done, f.size)
        finally:
            bar.close()
    rate = out.fetched / out.seconds if out.seconds > 0 else 0.0
    again = "; the first copy failed its sha256 check and was fetched again" if out.attempts > 1 else ""
    note(f"pulled {f.name}: {human_size(out.fetched)} in {out.seconds:.1f} s ({human_size(rate)}/s)"
         + (f", resumed at {human_size(out.resumed_at)}" if out.resumed_at else "") + again
         + "; sha256 verified")
    return _done(args, {"path": str(out.path), "fetched": out.fetched, "resumed_at": out.resumed_at,
                        "seconds": round(out.seconds, 3), "attempts": out.attempts, "already": False,
                        "sha256": f.sha256, "fit": p.fit.to_json() if p.fit else None})


def _done(args, result: dict) -> int:
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(result["path"])
    return 0


def _paused(args, bar, done: int | None, size: int) -> int:
    bar.close()
    kept = f"{human_size(done)} of {human_size(size)} kept" if done is not None else "the partial is kept"
    note(f"paused: {kept}; resume with `llamadesk pull {args.spec}`, "
         f"or remove it with `llamadesk pull {args.spec} --cancel`")
    return 130


def _cancel(args) -> int:
    from app.hub.pull import cancel

    removed = cancel(args.spec)
    if not removed:
        raise ValueError(f"no partial download of {args.spec} to cancel")
    for p in removed:
        print(f"removed the partial {p.repo}/{p.name} ({human_size(p.on_disk)} freed)")
    return 0


class _Bar:
    """tqdm's byte bar on a terminal (stderr); nothing elsewhere. One per phase."""

    def __init__(self, name: str):
        self.name = name
        self.bar: tqdm | None = None
        self.phase: str | None = None

    def update(self, phase: str, done: int, total: int) -> None:
        if not sys.stderr.isatty():
            return
        if phase != self.phase:
            self.close()
            from tqdm import tqdm

            desc = self.name if phase == "download" else "verifying sha256"
            self.bar = tqdm(total=total, initial=done, unit="B", unit_scale=True, desc=desc[-40:],
                            file=sys.stderr, dynamic_ncols=True, mininterval=0.25, leave=False)
            self.phase = phase
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
