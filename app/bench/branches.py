"""`llamadesk bench --branches`: what the KV cache saves when a conversation is a tree.

A conversation of about 3,000 prompt tokens (a system prompt, several long
turns of generated, deterministic text: the history's assistant turns are
fixed texts, not the model's answers) and three branches of it:
- main: the whole conversation, its last question answered;
- sibling: forks at the second-to-last question (another question, another
  answer, another last question): about as long as main;
- early: forks at the second question and runs as long as main;
- edit: the second question edited, answered right away (main's first turn
  and the edited question).

Each case is one reply (greedy, 8 tokens, every token decoded) after the
state the case names, on one engine with no prompt cache on disk, so what is
reused is the KV cache in memory alone:
- cold: a fresh context (reset) answering main: nothing reused;
- regenerate: main again right after it (the cache holds it and its reply);
- switch_sibling: sibling after main, and switch_back: main after sibling;
- switch_early: early after main: the branch point is at the second question;
- edit_early: edit after main;
- restart: a new engine (model loaded again, prompt cache on disk on, in a
  private XDG_CACHE_HOME) answering main after an earlier engine answered it:
  what the disk gives back (cached_disk_tokens).
Every prompt a case answers is also prefilled cold (reset first) in each
repeat, and `cold_over_case` is that cold TTFT over the case's: how many times
faster than evaluating the same prompt from nothing. Each case runs `repeats`
times; the medians are reported. The engines are warmed up by a short reply
first, so model load and first-call costs are left out of every figure, the
restart's too.

The disk cache saves only the shared chat prefix (the system prompt and the
preamble: what every chat with that system prompt starts with, as
LocalChatEngine.shared_prefix finds it), never a conversation's own turns,
so after a restart a conversation is evaluated again from that prefix on;
`disk_cache` says how much of the prompt that is.

On a sliding-window model (the bundled Gemma 3: a 512-token window) the
cache in memory can only go back about n_ubatch tokens by itself
(`sliding_window`); further back, the decoder restores the latest checkpoint
of the window at or before the branch point (app.engine.swa_checkpoints:
taken where each prefill chunk ends and where a prompt's cached part ends)
and evaluates from there. `checkpoints` says what they cost: how many the
decoder held at the end, their bytes, and the time to take and to restore
one. With `baseline`, every case after the cold one runs again in each
repeat with the checkpoints off (`no_checkpoints`: what the cache alone
reused, and its TTFT), so before and after come from one run.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from app.chat.local_engine import LocalChatEngine
from app.engine.loader import LoadOptions, load_model
from app.engine.message import MessageBody
from app.engine.models import resolve_model
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.errors import LlamaDeskError
from app.paths import APP_NAME

TARGET_TOKENS = 3000
TURNS = 8
N_CTX = 4096
MAX_TOKENS = 8
REPEATS = 3
# Each case: the branch it answers, and what the cache held before (the order of run_branches_bench).
CASES = {
    "cold": ("main", "nothing (a fresh context)"),
    "regenerate": ("main", "main and its reply"),
    "switch_sibling": ("sibling", "main (fork at the 2nd-to-last question)"),
    "switch_back": ("main", "sibling"),
    "switch_early": ("early", "main (fork at question 2)"),
    "edit_early": ("edit", "main (question 2 edited)"),
    "restart": ("main", "a new engine: the prompt cache on disk"),
}

_PLACES = ("the harbour wall", "the old mill", "the salt marsh", "the chapel on the hill",
           "the ferry landing", "the orchard", "the lime kiln", "the weir", "the market hall",
           "the signal box", "the rope walk", "the boat yard", "the toll bridge", "the granary",
           "the lighthouse", "the village school")
_EVENTS = ("was rebuilt after", "was first mapped during", "lost its roof in", "was painted for",
           "changed hands after", "flooded during", "was lit for the first time at", "was closed for")
_TIMES = ("the spring fair", "the great storm", "the harvest of the dry year", "the bishop's visit",
          "the long winter", "the railway strike", "the coronation", "the year of the comet")
_DETAILS = ("and the stones still show the marks of the masons who cut them",
            "so the fishermen moved their nets to the north beach for a season",
            "which the parish records describe in a careful, tidy hand",
            "and the children of the village were given a holiday to watch",
            "although nobody could agree afterwards on who had paid for it",
            "and a brass plate by the door still gives the date",
            "while the carters waited with their loads on the road outside",
            "so the town council met in the back room of the inn for a month")
# Questions of different branches at the same turn differ from their first word.
_OPENERS = ("Tell me more about", "Why did people care so much about", "What happened next to",
            "Who looked after", "How long did it take to repair", "Describe for a visitor",
            "Which records mention", "Explain in plain words the story of")
_SHIFT = {"main": 0, "sibling": 3, "early": 5}


class BenchError(LlamaDeskError):
    pass


def _sentence(rng: random.Random) -> str:
    place = rng.choice(_PLACES)
    return (f"{place[0].upper()}{place[1:]} {rng.choice(_EVENTS)} {rng.choice(_TIMES)}, "
            f"{rng.choice(_DETAILS)}.")


def _question(branch: str, turn: int) -> str:
    rng = random.Random(f"question {branch} {turn}")
    opener = _OPENERS[(turn + _SHIFT[branch]) % len(_OPENERS)]
    return f"{opener} {rng.choice(_PLACES)} and {rng.choice(_TIMES)}? Keep to what the notes say."


def _paragraph(seed: str, tokens: int, count: Callable[[str], int]) -> str:
    """Sentences of a seeded generator until the text is `tokens` long."""
    rng = random.Random(seed)
    text = _sentence(rng)
    while count(text) < tokens:
        text += " " + _sentence(rng)
    return text


@dataclass(frozen=True)
class Branch:
    history: list[MessageBody]
    question: str


@dataclass(frozen=True)
class Conversation:
    system: str
    turns: int
    branches: dict[str, Branch]  # main, sibling, early, edit


def conversation(engine: LocalChatEngine, target_tokens: int = TARGET_TOKENS,
                 turns: int = TURNS) -> Conversation:
    """The conversation and its branches; main's prompt about `target_tokens` long."""
    if turns < 4:
        raise ValueError(f"a branch at question 2 and one at the second-to-last need 4 turns, got {turns}")

    def count(text: str) -> int:
        return len(engine.decoder.tokenize(text, add_bos=False))

    system = ("You are the guide of a small coastal town's museum. Answer visitors' questions about the "
              "town's buildings from these notes, warmly and in plain words. "
              + _paragraph("system", max(24, target_tokens // 12), count))

    def build(answer_tokens: int) -> dict[str, Branch]:
        def turn(branch: str, i: int) -> list[MessageBody]:
            return [MessageBody("user", _question(branch, i)),
                    MessageBody("assistant", _paragraph(f"answer {branch} {i}", answer_tokens, count))]

        def path(forks: list[tuple[str, int]]) -> list[MessageBody]:
            return [m for branch, i in forks for m in turn(branch, i)]

        n = turns
        return {
            "main": Branch(path([("main", i) for i in range(1, n)]), _question("main", n)),
            "sibling": Branch(path([("main", i) for i in range(1, n - 1)] + [("sibling", n - 1)]),
                              _question("sibling", n)),
            "early": Branch(path([("main", 1)] + [("early", i) for i in range(2, n)]), _question("early", n)),
            "edit": Branch(path([("main", 1)]), _question("early", 2)),
        }

    def length(answer_tokens: int) -> int:
        main = build(answer_tokens)["main"]
        return len(engine.prompt_tokens([MessageBody("system", system), *main.history,
                                         MessageBody("user", main.question)]))

    lo, hi = 32, 128  # main's length grows about linearly with the answers'
    at_lo, at_hi = length(lo), length(hi)
    budget = max(8, round(lo + (target_tokens - at_lo) * (hi - lo) / max(1, at_hi - at_lo)))
    return Conversation(system, turns, build(budget))


def _settings(max_tokens: int) -> GenerationSettings:
    # Greedy, and every token decoded: no reply ends before its first visible text.
    return GenerationSettings(max_tokens=max_tokens, temperature=0, ignore_eos=True)


def _row(st: ReplyStats) -> dict:
    if st.ttft_s is None:
        raise BenchError("branches bench: a reply gave no text to time")
    return {"ttft_s": st.ttft_s, "prompt_tokens": st.prompt_tokens, "cached_tokens": st.cached_tokens,
            "prefill_tokens": st.prefill_tokens, "cached_disk_tokens": st.cached_disk_tokens}


# The cases answered from a warm cache, in order, each after the one before; None: main again
# before the edit, so that the edit branches off main, not off early.
_WARM = (("regenerate", "main"), ("switch_sibling", "sibling"), ("switch_back", "main"),
         ("switch_early", "early"), (None, "main"), ("edit_early", "edit"))


class _Runner:
    def __init__(self, engine: LocalChatEngine, convo: Conversation, max_tokens: int):
        self.engine, self.convo, self.settings = engine, convo, _settings(max_tokens)

    def reply(self, branch: str) -> dict:
        b = self.convo.branches[branch]
        return _row(self.engine.reply(b.history, b.question, self.settings, system=self.convo.system).stats)

    def cold(self, branch: str) -> dict:
        self.engine.reset()
        return self.reply(branch)


@contextmanager
def _cache_home(folder: str) -> Iterator[None]:
    """XDG_CACHE_HOME pointed at `folder` (app.paths reads it on every call), then put back."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = folder
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = before


def _warm(engine: LocalChatEngine) -> None:
    engine.reply([], "Hello.", _settings(8))
    engine.reset()


def _restart(path: Path, opts: LoadOptions, convo: Conversation, max_tokens: int,
             repeats: int) -> tuple[list[dict], dict]:
    """Main answered by a new engine (its own load of the model, the disk prompt cache on, in a
    private cache folder) after an earlier engine answered it; what that folder holds."""
    rows: list[dict] = []
    saved: list[Path] = []
    shared: list[int] | None = None
    with tempfile.TemporaryDirectory(prefix="llamadesk-bench-") as tmp, _cache_home(tmp):
        folder = Path(tmp) / APP_NAME / "prompt-cache"  # app.paths.prompt_cache_dir() here
        for i in range(repeats + 1):  # the first one only fills the cache
            engine = LocalChatEngine(load_model(path, opts), prompt_cache=True)
            try:
                if engine.decoder.prompt_cache is None:
                    raise BenchError(f"branches bench: {'; '.join(engine.notes)}")
                _warm(engine)
                entries = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
                row = _Runner(engine, convo, max_tokens).reply("main")
                shared = engine.shared_prefix(convo.system, True)
            finally:
                engine.close()
            if i:
                rows.append(row)
            else:
                saved = sorted(p for p in folder.iterdir() if p.name not in entries and p.suffix == ".kv")
        disk = {"entries_saved_by_main": len(saved), "bytes_saved": sum(p.stat().st_size for p in saved),
                "shared_prefix_tokens": len(shared or [])}
    return rows, disk


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _checkpoint_costs(engine: LocalChatEngine) -> dict | None:
    """What the sliding-window checkpoints held and cost over the run (None: the model needs none)."""
    cps = engine.decoder.checkpoints
    if cps is None:
        return None
    c = cps.costs
    return {"peak_held": c.peak_count, "peak_bytes": c.peak_bytes,
            "bytes_each": c.saved_bytes // c.saved if c.saved else None,
            "max_count": cps.max_count, "max_bytes": cps.max_bytes, "saved": c.saved, "restored": c.restored,
            "failed": c.failed, "evicted": c.evicted,
            "save_ms_each": round(c.save_s / c.saved * 1000, 2) if c.saved else None,
            "restore_ms_each": round(c.restore_s / c.restored * 1000, 2) if c.restored else None}


def run_branches_bench(model_path, opts: LoadOptions, target_tokens: int = TARGET_TOKENS, turns: int = TURNS,
                       repeats: int = REPEATS, max_tokens: int = MAX_TOKENS, baseline: bool = False) -> dict:
    path = resolve_model(model_path)
    opts = replace(opts, n_ctx=max(opts.n_ctx, N_CTX))
    runs: dict[str, list[dict]] = {name: [] for name in CASES}
    plain: dict[str, list[dict]] = {name: [] for name, _ in _WARM if name}  # checkpoints off
    colds: dict[str, list[dict]] = {b: [] for b in ("main", "sibling", "early", "edit")}
    engine = LocalChatEngine(load_model(path, opts), prompt_cache=False)  # memory alone
    try:
        convo = conversation(engine, target_tokens, turns)
        _warm(engine)
        run = _Runner(engine, convo, max_tokens)
        checkpoints = engine.decoder.checkpoints
        for _ in range(repeats):
            for b in ("sibling", "early", "edit"):
                colds[b].append(run.cold(b))
            runs["cold"].append(run.cold("main"))
            colds["main"].append(runs["cold"][-1])
            for name, branch in _WARM:
                row = run.reply(branch)
                if name:
                    runs[name].append(row)
            if not baseline or checkpoints is None:
                continue
            engine.decoder.checkpoints = None
            try:
                run.cold("main")
                for name, branch in _WARM:
                    row = run.reply(branch)
                    if name:
                        plain[name].append(row)
            finally:
                engine.decoder.checkpoints = checkpoints
                engine.reset()
        threads = engine.report.n_threads
        runs_on = engine.report.runs_on
        n_swa = engine.decoder.n_swa
        costs = _checkpoint_costs(engine)
    finally:
        engine.close()
    runs["restart"], disk = _restart(path, opts, convo, max_tokens, repeats)
    cases = {}
    for name, (branch, after) in CASES.items():
        rows, cold = runs[name], _median(colds[branch], "ttft_s")
        ttft = _median(rows, "ttft_s")
        cases[name] = {
            "branch": branch, "after": after, "prompt_tokens": rows[-1]["prompt_tokens"],
            "ttft_s": round(ttft, 4),
            "cached_tokens": round(_median(rows, "cached_tokens")),
            "prefill_tokens": round(_median(rows, "prefill_tokens")),
            "cached_disk_tokens": round(_median(rows, "cached_disk_tokens")),
            "cold_ttft_s": round(cold, 4),
            "cold_over_case": round(cold / ttft, 2),
            "ttft_runs_s": [round(r["ttft_s"], 4) for r in rows],
            "no_checkpoints": {"ttft_s": round(_median(plain[name], "ttft_s"), 4),
                               "cached_tokens": round(_median(plain[name], "cached_tokens"))}
            if plain.get(name) else None,
        }
    main_tokens = cases["cold"]["prompt_tokens"]
    restored = cases["restart"]["cached_disk_tokens"]
    disk.update({
        "restart_cached_disk_tokens": restored,
        "restart_reused_share": round(restored / main_tokens, 3) if main_tokens else None,
        "keeps": "only the shared chat prefix (system prompt and preamble); a conversation's own turns "
                 "are evaluated again after a restart",
    })
    return {
        "model": str(path), "runs_on": runs_on, "threads": threads, "n_ctx": opts.n_ctx,
        "max_tokens": max_tokens, "repeats": repeats, "turns": turns,
        "system_prompt_tokens": disk["shared_prefix_tokens"], "main_prompt_tokens": main_tokens,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cases": cases, "disk_cache": disk, "sliding_window": _window(n_swa, opts.n_ubatch),
        "checkpoints": costs,
    }


def _window(n_swa: int, n_ubatch: int) -> dict | None:
    """A sliding-window model's limit on going back by itself (None: the model has no window). Its
    cache keeps n_swa + n_ubatch positions (llama.cpp's swa_full off) and the next token needs the
    n_swa before it, so the cache alone reuses a prefix only when it ends at most ~n_ubatch tokens
    before the cache's end (Decoder._prefix_usable); further back it goes to a checkpoint."""
    if n_swa <= 0:
        return None
    return {"n_swa": n_swa, "cells": n_swa + n_ubatch, "max_rollback_tokens": n_ubatch}


def table(result: dict) -> str:
    """The cases, one a line (with the checkpoints off too, where the run measured it), and what
    the disk cache and the checkpoints kept."""
    cases = result["cases"]
    base = any(c.get("no_checkpoints") for c in cases.values())
    head = ("case", "branch", "prompt", "cached", "prefilled", "from disk", "TTFT ms", "cold ms", "cold/case",
            *(("no-ckpt cached", "no-ckpt ms") if base else ()))

    def plain(c: dict) -> tuple[str, ...]:
        p = c.get("no_checkpoints")
        if not base:
            return ()
        return (str(p["cached_tokens"]), f"{p['ttft_s'] * 1000:.0f}") if p else ("", "")

    rows = [head] + [(name, c["branch"], str(c["prompt_tokens"]), str(c["cached_tokens"]),
                      str(c["prefill_tokens"]), str(c["cached_disk_tokens"]), f"{c['ttft_s'] * 1000:.0f}",
                      f"{c['cold_ttft_s'] * 1000:.0f}", f"{c['cold_over_case']:.2f}", *plain(c))
                     for name, c in cases.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"{result['model']} · {result['runs_on']} · {result['threads']} threads · context "
             f"{result['n_ctx']} · {result['turns']} turns, {result['main_prompt_tokens']} prompt tokens · "
             f"{result['max_tokens']} tokens a reply · median of {result['repeats']} · load "
             f"{result['load_avg_1m']:.1f}"]
    lines += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    d = result["disk_cache"]
    lines.append(f"disk prompt cache: keeps {d['keeps']}: {d['restart_cached_disk_tokens']} of "
                 f"{result['main_prompt_tokens']} tokens after a restart ({d['restart_reused_share']:.0%}; "
                 f"{d['entries_saved_by_main']} entry, {d['bytes_saved'] / 2**20:.1f} MiB)")
    w = result["sliding_window"]
    if w is not None:
        lines.append(f"sliding window: {w['n_swa']} tokens, {w['cells']} cells kept: a branch point more "
                     f"than ~{w['max_rollback_tokens']} tokens back from the cache's end goes back to a "
                     "checkpoint of the window")
    k = result.get("checkpoints")
    if k is not None:
        each = f"{k['bytes_each'] / 2**20:.1f} MiB each" if k["bytes_each"] else "none taken"
        save = f"{k['save_ms_each']:.1f} ms" if k["save_ms_each"] is not None else "-"
        restore = f"{k['restore_ms_each']:.1f} ms" if k["restore_ms_each"] is not None else "-"
        lines.append(f"checkpoints of the window: {each}, at most {k['peak_held']} held at once "
                     f"({k['peak_bytes'] / 2**20:.1f} MiB; the bound is {k['max_count']} and "
                     f"{k['max_bytes'] / 2**20:.0f} MiB); {k['saved']} taken ({save} each), {k['restored']} "
                     f"restored ({restore} each), {k['failed']} refused")
    return "\n".join(lines)
