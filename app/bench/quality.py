"""`llamadesk bench --quality`: how often everyday replies come out broken, by kind.

Every reply of the set in quality_set is classified (empty, echo, role marker,
copy, ok), once with today's defaults and once as LlamaDesk answered before
the base-model work (no preamble, only "User:" stops, penalties blind to the
prompt), in one run on one loaded model, so the two rates are comparable. Seeds are fixed per prompt:
the figure is a property of the defaults, not of one lucky draw.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

from app.bench.quality_set import CHATS, KINDS, PROMPTS, classify
from app.chat.local_engine import LocalChatEngine
from app.config import AppConfig
from app.engine.loader import LoadOptions
from app.engine.message import MessageBody
from app.engine.prompt import TranscriptFormat

LEGACY_STOPS = ("\nUser:",)  # what the transcript format stopped on before
MAX_TOKENS = 96  # enough for every kind of failure to show; keeps the run to minutes


def _variants() -> dict[str, dict]:
    base = AppConfig().generation()
    base.max_tokens = MAX_TOKENS
    plain = replace(base, dry_multiplier=0.0, penalize_prompt=False)
    return {"before": {"settings": plain, "preamble": False, "format": TranscriptFormat(LEGACY_STOPS)},
            "after": {"settings": base, "preamble": True, "format": TranscriptFormat()}}


def _ask(engine: LocalChatEngine, variant: dict, history: list[MessageBody], question: str,
         seed: int) -> str:
    settings = replace(variant["settings"], seed=seed, preamble=variant["preamble"])
    engine.format = variant["format"]  # this bench's own engine, on this thread
    engine.decoder.reset()  # every reply from the same (empty) cache state: comparable across variants
    return engine.reply(history, question, settings).text


def _run_variant(engine: LocalChatEngine, variant: dict) -> dict:
    fmt = engine.format
    seen = fmt.shown_texts() if variant["preamble"] and isinstance(fmt, TranscriptFormat) else ()
    kinds: Counter[str] = Counter()
    samples: dict[str, list[str]] = {}
    t0 = time.perf_counter()

    def judge(reply: str, question: str, earlier: tuple[str, ...]) -> None:
        kind = classify(reply, question, earlier)
        kinds[kind] += 1
        samples.setdefault(kind, [])
        if len(samples[kind]) < 3:
            samples[kind].append(f"{question} -> {reply[:120]!r}")

    for i, q in enumerate(PROMPTS):
        judge(_ask(engine, variant, [], q, seed=i), q, seen)
    for i, (q1, q2) in enumerate(CHATS):
        r1 = _ask(engine, variant, [], q1, seed=1000 + i)
        judge(r1, q1, seen)
        history = [MessageBody("user", q1), MessageBody("assistant", r1)]
        judge(_ask(engine, variant, history, q2, seed=2000 + i), q2, (*seen, q1, r1))
    total = sum(kinds.values())
    return {"replies": total, "bad_rate": 1 - kinds["ok"] / total,
            "by_kind": {k: kinds[k] for k in KINDS}, "examples": samples,
            "wall_s": time.perf_counter() - t0}


def run_quality_bench(model_path, opts: LoadOptions) -> dict:
    engine = LocalChatEngine.open(model_path, opts, prompt_cache=False)  # never the user's cache
    try:
        if engine.notice is None:
            raise ValueError("--quality judges the plain-transcript format; this model has a chat "
                             "template, which LlamaDesk uses unchanged")
        result: dict[str, Any] = {"model": engine.model.report.model_path, "max_tokens": MAX_TOKENS,
                  "prompts": len(PROMPTS), "chats": len(CHATS)}
        for name, variant in _variants().items():
            result[name] = _run_variant(engine, variant)
        result["bad_rate_before"] = result["before"]["bad_rate"]
        result["bad_rate_after"] = result["after"]["bad_rate"]
        return result
    finally:
        engine.close()
