"""A serving benchmark in the field's terms, against any OpenAI-compatible endpoint.

What `vllm bench serve` measures, measured the same way, so its plotting scripts
read the result: streaming requests sent either by a closed loop of
`max_concurrency` clients, or at `request_rate` per second with Poisson
arrivals (gamma intervals when `burstiness` is not 1, as vLLM draws them),
optionally capped by a concurrency too. Per request, on the client's clock:

- TTFT: sending the request to the first chunk that carries text;
- ITL: the gaps between chunks that carry text, each one observed;
- TPOT: (latency - TTFT) / (output tokens - 1), vLLM's definition, which
  leaves the first token out (GuideLLM's time per output token includes it:
  latency / output tokens);
- E2EL: sending the request to the last byte.

Output tokens are the server's `usage.completion_tokens` (streamed with
`stream_options.include_usage`), else the chunks that carried text. Goodput is
the completed requests per second that met every SLO given (`ttft:ms`,
`tpot:ms`, `e2el:ms`), as vLLM's `--goodput`.

One event loop of asyncio and httpx does the sending, so a level of 16 clients
costs the client one thread: on a small machine the client competes with the
server for the same cores.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import numpy as np

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")
SLO_KEYS = ("ttft", "tpot", "e2el")
TPOT_DEFINITION = "vllm: (latency - ttft) / (output_tokens - 1), the first token excluded"


@dataclass
class Sample:
    """One request to send: a chat's messages, or a completion's prompt."""

    messages: list[dict] | None = None
    prompt: str | None = None

    def body(self, model: str, max_tokens: int, extra: dict) -> tuple[str, dict]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}, **extra}
        if self.messages is not None:
            return "/chat/completions", {**body, "messages": self.messages}
        return "/completions", {**body, "prompt": self.prompt}


@dataclass
class Output:
    success: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    start_time: float = 0.0
    cached_tokens: int | None = None
    generated_text: str = ""
    error: str = ""


def parse_goodput(items: list[str] | None) -> dict[str, float]:
    """`ttft:500 tpot:50` -> {"ttft": 500.0, "tpot": 50.0} (milliseconds); refused in one line."""
    slos: dict[str, float] = {}
    for item in items or ():
        key, sep, value = item.partition(":")
        if not sep or key not in SLO_KEYS:
            raise ValueError(f"--goodput {item!r}: expected NAME:MS with NAME one of {', '.join(SLO_KEYS)}")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--goodput {item!r}: {value!r} is not a number of milliseconds") from None
        if not math.isfinite(ms) or ms <= 0:
            raise ValueError(f"--goodput {item!r}: the SLO must be a positive number of milliseconds")
        slos[key] = ms
    return slos


async def _one(http: httpx.AsyncClient, path: str, body: dict) -> Output:
    out = Output(start_time=time.perf_counter())
    last = out.start_time
    parts: list[str] = []
    chunks = 0
    try:
        async with http.stream("POST", path, json=body) as r:
            if r.status_code != 200:
                out.error = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                return out
            async for line in r.aiter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("error"):
                    out.error = str(chunk["error"])[:200]
                    return out
                usage = chunk.get("usage") or {}
                out.output_tokens = usage.get("completion_tokens") or out.output_tokens
                out.prompt_len = usage.get("prompt_tokens") or out.prompt_len
                details = usage.get("prompt_tokens_details") or {}
                if details.get("cached_tokens") is not None:
                    out.cached_tokens = details["cached_tokens"]
                for c in chunk.get("choices") or ():
                    text = c.get("text") or (c.get("delta") or {}).get("content")
                    if not text:
                        continue
                    now = time.perf_counter()
                    if chunks == 0:
                        out.ttft = now - out.start_time
                    else:
                        out.itl.append(now - last)
                    last = now
                    chunks += 1
                    parts.append(text)
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        out.error = f"{type(e).__name__}: {e}"
        return out
    out.latency = time.perf_counter() - out.start_time
    out.generated_text = "".join(parts)
    out.output_tokens = out.output_tokens or chunks
    out.success = chunks > 0
    if not out.success:
        out.error = "the reply carried no text"
    return out


def _intervals(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """Gaps before each request: none at an infinite rate, else gamma(burstiness) with mean
    1/rate (burstiness 1: exponential, the gaps of a Poisson process)."""
    if math.isinf(rate):
        return [0.0] * n
    rng = random.Random(seed)
    theta = 1.0 / (rate * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def _run(base: str, api_key: str | None, model: str, samples: list[Sample], max_tokens: int,
               extra: dict, concurrency: int | None, rate: float, burstiness: float, seed: int):
    limit = concurrency or len(samples)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    # No kept-alive connections: llama-server closes one after a few requests without saying so.
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits, headers=headers,
                                 trust_env=False) as http:
        gate = asyncio.Semaphore(limit)

        async def send(s: Sample) -> Output:
            async with gate:
                return await _one(http, *s.body(model, max_tokens, extra))

        t0 = time.perf_counter()
        tasks = []
        for s, gap in zip(samples, _intervals(len(samples), rate, burstiness, seed), strict=True):
            if gap:
                await asyncio.sleep(gap)
            tasks.append(asyncio.create_task(send(s)))
        outputs = await asyncio.gather(*tasks)
        return outputs, time.perf_counter() - t0


def run_level(base: str, model: str, samples: list[Sample], max_tokens: int, *,
              concurrency: int | None = None, rate: float = math.inf, burstiness: float = 1.0,
              goodput: dict[str, float] | None = None, extra: dict | None = None, api_key: str | None = None,
              seed: int = 0, label: str = "llamadesk", detailed: bool = False) -> dict:
    """One run (one concurrency, one rate) of `samples`: vLLM's result-file keys."""
    if concurrency is None and math.isinf(rate):
        raise ValueError("an infinite request rate needs a concurrency")
    outputs, duration = asyncio.run(_run(base, api_key, model, samples, max_tokens, extra or {}, concurrency,
                                         rate, burstiness, seed))
    kind = "openai-chat" if samples and samples[0].messages is not None else "openai"
    result: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": kind, "backend": kind,
        "label": label, "model_id": model, "tokenizer_id": None, "num_prompts": len(samples),
        "request_rate": rate if math.isfinite(rate) else "inf", "burstiness": burstiness,
        "max_concurrency": concurrency}
    result.update(summarize(outputs, duration, goodput or {}, detailed))
    return result


def summarize(outputs: list[Output], duration: float, goodput: dict[str, float],
              detailed: bool = False) -> dict:
    """vLLM's `calculate_metrics` figures for these outputs (numpy's linear percentiles)."""
    ok = [o for o in outputs if o.success]
    ttfts = [o.ttft for o in ok]
    tpots = [(o.latency - o.ttft) / (o.output_tokens - 1) for o in ok if o.output_tokens > 1]
    itls = [g for o in ok for g in o.itl]
    e2els = [o.latency for o in ok]
    total_in, total_out = sum(o.prompt_len for o in ok), sum(o.output_tokens for o in ok)
    good = 0
    if goodput:
        for o in ok:
            tpot = (o.latency - o.ttft) / (o.output_tokens - 1) if o.output_tokens > 1 else 0.0
            have = {"ttft": o.ttft, "tpot": tpot, "e2el": o.latency}
            good += all(have[k] * 1000 <= ms for k, ms in goodput.items())
    res: dict[str, Any] = {
        "duration": duration, "completed": len(ok), "failed": len(outputs) - len(ok),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration, "request_goodput": good / duration if goodput else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration, "max_concurrent_requests": _peak(ok),
        "tpot_definition": TPOT_DEFINITION,
        "cached_tokens": sum(o.cached_tokens or 0 for o in ok),
        "errors_seen": sorted({o.error for o in outputs if o.error})[:5]}
    for name, values in zip(METRICS, (ttfts, tpots, itls, e2els), strict=True):
        arr = np.asarray(values or [0.0]) * 1000
        res[f"mean_{name}_ms"] = float(arr.mean())
        res[f"median_{name}_ms"] = float(np.median(arr))
        res[f"std_{name}_ms"] = float(arr.std())
        for p in PERCENTILES:
            res[f"p{p}_{name}_ms"] = float(np.percentile(arr, p))
    if detailed:
        for key, attr in (("input_lens", "prompt_len"), ("output_lens", "output_tokens"), ("ttfts", "ttft"),
                          ("itls", "itl"), ("latencies", "latency"), ("start_times", "start_time"),
                          ("generated_texts", "generated_text"), ("errors", "error")):
            res[key] = [getattr(o, attr) for o in outputs]
    return res


def _peak(ok: list[Output]) -> int:
    """The most requests in flight at once (half-open intervals: an end before a start)."""
    events = sorted([(o.start_time, 1) for o in ok] + [(o.start_time + o.latency, -1) for o in ok])
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def first_model(base: str, api_key: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    r = httpx.get(base.rstrip("/") + "/models", headers=headers, timeout=10, trust_env=False)
    r.raise_for_status()
    return r.json()["data"][0]["id"]
