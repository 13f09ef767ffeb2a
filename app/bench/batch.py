"""`llamadesk bench --batch`: the same prompts online one after another, then batched.

Both halves run in one process on one loaded model, because absolute tok/s
on a shared machine drift between minutes; only the ratio measured in one run
means anything. Prefill is included on both sides: a batch user pays it too.

The slot sweep below is how DEFAULT_SLOTS (app/slots/engine.py) is chosen:
rerun it on the target machine before changing that default.
"""

from __future__ import annotations

import threading
import time

from app.engine.decoder import Decoder
from app.engine.loader import LoadOptions, load_model
from app.engine.models import resolve_model
from app.engine.sampling import GenerationSettings
from app.slots.engine import DEFAULT_SLOTS, BatchEngine
from app.slots.types import BatchProgress, SlotRequest

TOPICS = (
    "the sea", "a red fox", "bread", "rain", "mountains", "a clock", "trains", "the moon",
    "coffee", "a library", "winter", "bees", "a lighthouse", "chess", "rivers", "the desert",
    "a violin", "volcanoes", "gardens", "snow", "bicycles", "the post office", "owls", "maps",
    "a bridge", "apples", "thunder", "a market", "paper", "islands", "candles", "a harbour",
)


def bench_prompts(n: int) -> list[str]:
    return [f"User: Write a short paragraph about {TOPICS[i % len(TOPICS)]}"
            f"{'' if i < len(TOPICS) else f' (take {i // len(TOPICS) + 1})'}.\nAssistant:"
            for i in range(n)]


def _greedy(tokens: int) -> GenerationSettings:
    return GenerationSettings(max_tokens=tokens, temperature=0, ignore_eos=True)


def _online(dec: Decoder, prompts: list[list[int]], tokens: int) -> tuple[float, list[str]]:
    texts, gen = [], 0
    t0 = time.perf_counter()
    for p in prompts:
        dec.reset()
        done = dec.generate(p, _greedy(tokens))
        texts.append(done.text)
        gen += done.stats.decode_tokens
    return gen / (time.perf_counter() - t0), texts


class Ceilings:
    """The batched ceiling the engine reported with the most sequences decoding at once."""

    def __init__(self) -> None:
        self.best: BatchProgress | None = None

    def __call__(self, ev) -> None:
        if isinstance(ev, BatchProgress) and ev.ceiling_tok_s and (
                self.best is None or ev.decoding > self.best.decoding):
            self.best = ev

    def report(self, rate: float, flop_s: float | None) -> dict:
        b = self.best
        return {"decoding": b.decoding if b else None, "ceiling_tok_s": b.ceiling_tok_s if b else None,
                "ceiling_bound": b.ceiling_bound if b else None,
                "of_ceiling": rate / b.ceiling_tok_s if b else None,
                "prefill_gflop_s": flop_s / 1e9 if flop_s else None}


def _batched(eng: BatchEngine, prompts: list[list[int]], tokens: int) -> tuple[float, list[str]]:
    eng.submit_many(SlotRequest(f"p{i}", prompt_tokens=p, settings=_greedy(tokens))
                    for i, p in enumerate(prompts))
    t0 = time.perf_counter()
    res = eng.run()
    wall = time.perf_counter() - t0
    by_id = {r.custom_id: r for r in res}
    return (sum(r.stats.completion_tokens for r in res) / wall,
            [by_id[f"p{i}"].text for i in range(len(prompts))])


def online_ttft(eng: BatchEngine, prompt: list[int], background: list[list[int]] | None,
                tokens: int) -> float | None:
    """TTFT (from submit) of one online request, alone or while `background` is batched."""
    if background:
        eng.submit_many(SlotRequest(f"bg{i}", prompt_tokens=p, settings=_greedy(tokens))
                        for i, p in enumerate(background))
    else:
        eng.submit_online(SlotRequest("online", prompt_tokens=prompt, settings=_greedy(8)))
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("res", eng.run()), name="bench-batch", daemon=True)
    t.start()
    if background:
        time.sleep(1.0)  # let every slot fill and the batch reach its steady state
        eng.submit_online(SlotRequest("online", prompt_tokens=prompt, settings=_greedy(8)))
    t.join()
    mine = [r for r in out["res"] if r.custom_id == "online"]
    return mine[0].stats.ttft_from_queue_s if mine else None


def run_batch_bench(model_path, opts: LoadOptions, n_prompts: int = 32, tokens: int = 64,
                    sweep: tuple[int, ...] = (8, 16, 32)) -> dict:
    opts.n_ctx = max(opts.n_ctx, 1024)
    model = load_model(resolve_model(model_path), opts)
    dec = Decoder(model)
    slot_ctx = 512
    try:
        prompts = [dec.tokenize(p) for p in bench_prompts(n_prompts)]
        dec.generate(prompts[0], _greedy(8))  # page the weights in
        online_rate, online_texts = _online(dec, prompts, tokens)
        seen = Ceilings()
        eng = BatchEngine(model, DEFAULT_SLOTS, slot_ctx, on_event=seen)
        try:
            batch_rate, batch_texts = _batched(eng, prompts, tokens)
            ceiling = seen.report(batch_rate, eng.flop_s)
            ttft_alone = online_ttft(eng, prompts[0], None, tokens)
            ttft_busy = online_ttft(eng, prompts[0], prompts, tokens)
        finally:
            eng.free()
        rates = {DEFAULT_SLOTS: batch_rate}
        ceilings = {DEFAULT_SLOTS: ceiling}
        for n in sweep:
            if n in rates:
                continue
            seen = Ceilings()
            e = BatchEngine(model, n, slot_ctx, on_event=seen)
            try:
                rates[n] = _batched(e, prompts, tokens)[0]
                ceilings[n] = seen.report(rates[n], e.flop_s)
            finally:
                e.free()
        same = sum(a == b for a, b in zip(online_texts, batch_texts))
        return {
            "model": model.report.model_path,
            "runs_on": model.report.runs_on,
            "threads": model.report.n_threads,
            "prompts": n_prompts,
            "tokens_per_prompt": tokens,
            "slots": DEFAULT_SLOTS,
            "online_tok_s": online_rate,
            "batch_tok_s": batch_rate,
            "batch_speedup": batch_rate / online_rate,
            "slot_sweep_tok_s": {str(k): rates[k] for k in sorted(rates)},
            # Against the batched ceiling (app.engine.utilization.Limits.batched_ceiling).
            "batched_ceiling": {str(k): ceilings[k] for k in sorted(ceilings)},
            "best_slots": max(rates, key=rates.get),
            "online_ttft_idle_s": ttft_alone,
            "online_ttft_during_batch_s": ttft_busy,
            "greedy_identical": same,
            "greedy_divergence_rate": 1 - same / n_prompts,
        }
    finally:
        dec.close()
        model.close()
