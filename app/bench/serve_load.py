"""The loads `bench --serve` sends, and its sweeps over concurrency and request rate.

Two datasets:

- `completion`: the same raw text to /v1/completions of every server, so all
  evaluate the same tokens (the chat endpoint would wrap it in each server's
  own prompt format);
- `chat`: what chat clients send: one shared system prompt of about a hundred
  tokens (an app's instructions), then a different short question each. Each
  server renders it in its own format (LlamaDesk's transcript puts its
  examples after the system prompt, llama-server falls back to chatml), so the
  prompt tokens differ between servers, and every request shares a long prefix
  with every other: what a server's prefix caching is for.

Every request is greedy, exactly `tokens` long (`ignore_eos`), without repeat
penalty (servers' penalty samplers differ in cost, and that is not what is
compared).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from app.bench.serving import Sample, first_model, run_level

SYSTEM = ("You are the help desk of a public library. Answer the visitor's question in one or two short, "
          "friendly sentences, in plain English. If the question is about a fact, give the fact first and "
          "stop. If you do not know, say so and suggest asking a librarian at the front desk. Never make up "
          "titles, authors or opening hours, never give medical or legal advice, and do not repeat the "
          "question back to the visitor before answering it.")
_ASKS = ("What is {}?", "Name something made of {}.", "Describe {} in one line.", "Why do people like {}?",
         "Where can I read about {}?", "Is {} old or new?")
_TOPICS = ("bread", "the sea", "a red fox", "rain", "mountains", "a clock", "trains", "the moon", "coffee",
           "winter", "bees", "maps", "paper", "glass", "rivers", "the sun", "music", "salt", "bridges",
           "candles", "wool", "tea", "stamps", "owls")
GREEDY = {"temperature": 0, "ignore_eos": True, "repeat_penalty": 1.0}
DATASETS = ("chat", "completion")


def question(i: int) -> str:
    """The i-th of 144 distinct short questions."""
    ask, topic = _ASKS[i % len(_ASKS)], _TOPICS[(i // len(_ASKS)) % len(_TOPICS)]
    return ask.format(topic)


def samples(dataset: str, n: int, offset: int = 0) -> list[Sample]:
    """`n` requests of `dataset`, none the same as another's within 144 (`offset` moves on, so a
    level does not find its exact prompts cached by the one before)."""
    if dataset == "chat":
        return [Sample(messages=[{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": question(offset + i)}]) for i in range(n)]
    if dataset == "completion":
        return [Sample(prompt=f"Story {offset + i}. Write a long story about a dragon.\n") for i in range(n)]
    raise ValueError(f"unknown dataset {dataset!r}: one of {', '.join(DATASETS)}")


def per_level(concurrency: int) -> int:
    """Requests in a closed-loop level: each client sends two (and a lone client four), so the
    first wave's arrival all at once is not the whole measurement."""
    return max(4, 2 * concurrency)


def sweep(base: str, model: str, dataset: str, tokens: int, concurrencies=(), rates=(), *,
          max_concurrency: int | None = None, num_prompts: int | None = None, goodput=None,
          api_key: str | None = None, label: str = "llamadesk", extra: dict | None = None,
          burstiness: float = 1.0) -> list[dict]:
    """One run per concurrency (a closed loop), then one per request rate (Poisson arrivals,
    capped by `max_concurrency` when given); each a vLLM-shaped result with `dataset` added."""
    runs: list[dict] = []
    offset = 0
    plan = [(c, math.inf) for c in concurrencies] + [(max_concurrency, r) for r in rates]
    for c, rate in plan:
        # A closed loop: two requests a client; arrivals at a rate: eight seconds' worth.
        n = num_prompts or (per_level(c) if math.isinf(rate) else max(16, math.ceil(8 * rate)))
        res = run_level(base, model, samples(dataset, n, offset), tokens, concurrency=c, rate=rate,
                        burstiness=burstiness, goodput=goodput, extra=GREEDY if extra is None else extra,
                        api_key=api_key, label=label)
        res["dataset"] = dataset
        runs.append(res)
        offset += n
    return runs


def legacy(res: dict) -> dict:
    """The keys `bench --serve` reported before it spoke vLLM's, kept beside them."""
    return {"requests": res["completed"] + res["failed"], "aggregate_tok_s": res["output_throughput"],
            "prompt_tokens": res["total_input_tokens"] / res["completed"] if res["completed"] else 0,
            "p50_ttft_s": res["median_ttft_ms"] / 1000, "p95_ttft_s": res["p95_ttft_ms"] / 1000}


def run_endpoint_serve(base: str, api_key: str | None, model: str | None, dataset: str, tokens: int,
                       concurrencies=(), rates=(), *, max_concurrency: int | None = None,
                       num_prompts: int | None = None, goodput=None, burstiness: float = 1.0,
                       result_dir: str | None = None) -> dict:
    """`bench --serve --endpoint URL`: the sweep against any OpenAI-compatible server (LlamaDesk,
    llama-server, Ollama, vLLM). With `result_dir`, each run is also written there as its own
    file, named and shaped as `vllm bench serve --save-result` writes one."""
    model = model or first_model(base, api_key)
    runs = sweep(base, model, dataset, tokens, concurrencies, rates, max_concurrency=max_concurrency,
                 num_prompts=num_prompts, goodput=goodput, api_key=api_key, label="llamadesk-bench",
                 burstiness=burstiness)
    if result_dir:
        folder = Path(result_dir)
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model)
        for i, r in enumerate(runs):
            name = (f"{r['backend']}-{r['request_rate']}qps-concurrency{r['max_concurrency']}-{safe}-"
                    f"{r['date']}-{i}")
            (folder / f"{name}.json").write_text(json.dumps(r))
    return {"endpoint": base, "model": model, "dataset": dataset, "runs": runs}
