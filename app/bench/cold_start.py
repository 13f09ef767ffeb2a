"""`llamadesk bench --cold-start`: what a long system prompt costs a fresh process.

The prompt cache on disk promises that a system prompt a user keeps for every
chat is evaluated once, not once per process: the first reply of a new
`ask` (or window) after a ~1,500-token system prompt should come about as
fast as the first reply with none. So the figure is
`cold_start_ttft_ratio` = median TTFT with the long system prompt, cached
on disk by an earlier process / median TTFT with no system prompt (the
preamble on in both, so both load their prefix from disk), each in a fresh
process, alternating, with the uncached TTFT (cache cleared) for contrast.

Every process runs `llamadesk ask --json --no-save` and the TTFT is the one
in its stats record: from the request to the first visible text, so
interpreter start and model load are left out and only the prompt is
compared. The children's XDG_CACHE_HOME is a private temporary folder, so
the user's own prompt cache is neither used nor touched.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from app.engine.loader import LoadOptions
from app.engine.models import resolve_model
from app.errors import LlamaDeskError
from app.paths import APP_NAME

MESSAGE = "Hi"
TOPICS = ("the tide tables", "the fog horn", "the keeper's logbook", "the brass lens", "the oil lamps",
          "the spiral staircase", "the storm of 1887", "the supply boat", "the signal flags",
          "the weather glass", "the keeper's garden", "the rescue of the schooner Mary",
          "the paraffin store", "the clockwork rotation", "the lantern room", "the keeper's children",
          "the winter rations", "the telegraph line", "the shipwreck map", "the painted stripes",
          "the relief keepers", "the granite tower", "the seabird colony", "the night watch")


class BenchError(LlamaDeskError):
    pass


def long_system_prompt() -> str:
    """A system prompt of the kind a user keeps for every chat: about 1,500 tokens of notes."""
    head = ("You are the guide of a small museum about the lighthouse keepers of the northern coast. "
            "Visitors ask short questions; answer warmly, in plain words, in at most three sentences, "
            "and never invent dates or names that are not in these notes.\n\n")
    notes = "".join(f"Note {i + 1}, on {t}: when a visitor asks about {t}, explain what it was for, who "
                    f"looked after it and how the keepers' daily routine changed because of it, and point "
                    f"them to room {i % 6 + 1} of the museum, where {t} is shown.\n"
                    for i, t in enumerate(TOPICS))
    return head + notes


def _ask(model: Path, opts: LoadOptions, env: dict, system: str | None) -> dict:
    """One fresh process answering MESSAGE; its stats record."""
    cmd = [sys.executable, "-m", "app", "ask", MESSAGE, "--json", "--no-save", "--temperature", "0",
           "--max-tokens", "8", "--model", str(model), "--ctx", str(opts.n_ctx),
           "--gpu-layers", str(opts.n_gpu_layers)]
    if opts.n_threads:
        cmd += ["--threads", str(opts.n_threads)]
    if opts.flash_attn:
        cmd.append("--flash-attn")
    if system is not None:
        cmd += ["--system", system]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        raise BenchError(f"cold-start bench: a child `llamadesk ask` failed: {last}")
    stats = json.loads(r.stdout)["stats"]
    if stats.get("ttft_s") is None:
        raise BenchError("cold-start bench: a child `llamadesk ask` gave no text to time")
    return stats


def _entries(folder: Path) -> list[Path]:
    """The prompt cache's files; right after the first child, exactly the long prompt's entry."""
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def run_cold_start_bench(model_path, opts: LoadOptions, rounds: int = 3) -> dict:
    model = resolve_model(model_path)
    system = long_system_prompt()
    with tempfile.TemporaryDirectory(prefix="llamadesk-bench-") as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": tmp}
        folder = Path(tmp) / APP_NAME / "prompt-cache"  # app.paths.prompt_cache_dir() in the children
        # Earlier processes: remember the model's hash and save both prefixes.
        _ask(model, opts, env, system)
        long_entry = _entries(folder)
        _ask(model, opts, env, None)
        cached, plain, uncached = [], [], []
        for _ in range(rounds):
            cached.append(_ask(model, opts, env, system))
            plain.append(_ask(model, opts, env, None))
            for f in long_entry:  # this one evaluates everything, and saves the prefix again
                f.unlink(missing_ok=True)
            uncached.append(_ask(model, opts, env, system))
    a, b, u = (_median(rows, "ttft_s") for rows in (cached, plain, uncached))
    return {
        "model": str(model),
        "rounds": rounds,
        "message": MESSAGE,
        "cached_prompt_tokens": cached[-1]["prompt_tokens"],
        "cached_disk_tokens": min(r["cached_disk_tokens"] for r in cached),
        "plain_prompt_tokens": plain[-1]["prompt_tokens"],
        "plain_cached_disk_tokens": min(r["cached_disk_tokens"] for r in plain),
        "uncached_disk_tokens": max(r["cached_disk_tokens"] for r in uncached),
        "cached_ttft_s": a,
        "plain_ttft_s": b,
        "uncached_ttft_s": u,
        "cold_start_ttft_ratio": a / b,
        # Each round's own ratio too: a shared machine drifts between rounds.
        "round_ratios": [x["ttft_s"] / y["ttft_s"] for x, y in zip(cached, plain)],
        "uncached_ttft_ratio": u / b,
    }
