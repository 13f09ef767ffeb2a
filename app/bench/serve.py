"""`llamadesk bench --serve`: `llamadesk serve` under load, against llama.cpp's llama-server.

Both servers run in this one benchmark, one after the other, on the same
model, slot count and per-slot context, and take the same loads
(app.bench.serve_load): the `completion` dataset (the same raw text to both)
and the `chat` dataset (a shared system prompt, a different question each),
each at 1, 4, 8 and 16 concurrent streaming clients, and at the request rates
asked for (Poisson arrivals). Every run is measured in the field's terms
(app.bench.serving: TTFT, TPOT, ITL, E2EL at p50/p90/p99, throughput, goodput),
beside the keys this benchmark reported before. Then, on LlamaDesk's server
alone: online TTFT while a Batch API batch fills every slot, against TTFT
when idle.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import httpx

from app.bench.serve_load import DATASETS, GREEDY, legacy, samples, sweep
from app.bench.servers import ServerProcess, free_port, llama_tools
from app.bench.serving import TPOT_DEFINITION, run_level
from app.engine.backend import tool_env
from app.engine.models import resolve_model

LEVELS = (1, 4, 8, 16)


def clients(base: str, n: int) -> httpx.Client:
    """One client for `n` concurrent streams, made before the clock starts: a client per
    request would time its own setup (an SSL context, tens of ms of CPU) as the server's
    TTFT. Each request opens its own connection (a localhost connect costs well under a
    millisecond): llama-server closes a kept-alive connection after 5 requests without
    saying so, and the next request on it would fail."""
    return httpx.Client(base_url=base, timeout=600, trust_env=False,
                        limits=httpx.Limits(max_connections=n, max_keepalive_connections=0))


def _one(http: httpx.Client, model: str, i: int, tokens: int,
         chat: bool = False) -> tuple[float | None, int, int]:
    """One streaming request, for the warm-up and the TTFT probes during a batch: (TTFT, tokens
    received, prompt tokens the server counted)."""
    text = f"{i}. Write a long story about a dragon."
    body = {"model": model, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "repeat_penalty": 1.0,
            "stream": True, "stream_options": {"include_usage": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = f"Story {text}\n"
    t0 = time.perf_counter()
    ttft, n, prompt_n = None, 0, 0
    with http.stream("POST", "/v1/chat/completions" if chat else "/v1/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            prompt_n = (chunk.get("usage") or {}).get("prompt_tokens") or prompt_n
            for c in chunk.get("choices") or ():
                if c.get("text") or (c.get("delta") or {}).get("content"):
                    ttft = ttft if ttft is not None else time.perf_counter() - t0
                    n += 1
    return ttft, n, prompt_n


def _sweeps(srv: ServerProcess, tokens: int, levels, rates, goodput) -> dict:
    """Both datasets over the levels, then the rates: {dataset: {level: run}, "rates": {dataset: [run]}}."""
    with clients(srv.base, 1) as http:
        _one(http, srv.model, -1, 4)  # warm up
    out: dict[str, Any] = {"rates": {}}
    for dataset in DATASETS:
        runs = sweep(srv.base + "/v1", srv.model, dataset, tokens, levels, goodput=goodput)
        out[dataset] = {str(c): {**legacy(r), **r} for c, r in zip(levels, runs, strict=True)}
        if rates:
            out["rates"][dataset] = sweep(srv.base + "/v1", srv.model, dataset, tokens, rates=rates,
                                          max_concurrency=max(levels), goodput=goodput)
    return out


def _ttft_during_batch(srv: ServerProcess, slots: int, tokens: int) -> dict:
    online = clients(srv.base, 1)
    idle = [_one(online, srv.model, 1000 + i, 4, chat=True)[0] for i in range(3)]
    lines = [json.dumps({"custom_id": f"b{i}", "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": srv.model, "max_tokens": tokens * 4, "ignore_eos": True,
                                  "messages": [{"role": "user", "content": f"{i}. Write a long essay."}]}})
             for i in range(slots * 3)]
    with httpx.Client(base_url=srv.base, timeout=60) as c:
        fid = c.post("/v1/files", data={"purpose": "batch"},
                     files={"file": ("load.jsonl", io.BytesIO("\n".join(lines).encode()))}).json()["id"]
        bid = c.post("/v1/batches", json={"input_file_id": fid, "endpoint": "/v1/chat/completions",
                                          "completion_window": "24h"}).json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every batch slot busy
            metrics = c.get("/metrics").text.splitlines()
            busy = [ln for ln in metrics if ln.startswith("llamadesk_slots_busy ")]
            if busy and float(busy[0].split()[1]) >= slots:
                break
            time.sleep(0.1)
        during = [_one(online, srv.model, 2000 + i, 4, chat=True)[0] for i in range(3)]
        still = c.get(f"/v1/batches/{bid}").json()["status"]
        c.post(f"/v1/batches/{bid}/cancel")
    online.close()
    idle_s, busy_s = statistics.median(idle), statistics.median(during)
    return {"online_ttft_idle_s": idle_s, "online_ttft_during_batch_s": busy_s,
            "online_ttft_ratio": busy_s / idle_s, "batch_still_running": still == "in_progress"}


def _ttft_among_clients(srv: ServerProcess, n_clients: int, tokens: int) -> dict:
    """A chat request's TTFT while `n_clients` chat clients decode, against the same kind of
    request on the idle server (each probe a question of its own, after the shared system
    prompt). Probes that land after the clients are done are not counted."""
    base = srv.base + "/v1"

    def probe(i: int) -> float:
        return run_level(base, srv.model, samples("chat", 1, 100 + i), 4, concurrency=1,
                         extra=GREEDY)["median_ttft_ms"] / 1000

    idle = [probe(i) for i in range(5)]
    load = threading.Thread(target=run_level, daemon=True,
                            args=(base, srv.model, samples("chat", n_clients, 120), tokens * 3),
                            kwargs={"concurrency": n_clients, "extra": GREEDY})
    load.start()
    time.sleep(1.0)  # every client admitted and past its prefill
    among: list[float] = []
    rng = random.Random(0)
    for i in range(6):
        t = probe(10 + i)
        if load.is_alive():
            among.append(t)
        time.sleep(rng.uniform(0.05, 0.3))  # arrivals at no fixed phase of the clients' steps
    load.join()
    key = f"chat_ttft_among_{n_clients}_clients_s"
    busy = statistics.median(among) if among else None
    return {"chat_ttft_idle_s": statistics.median(idle), key: busy, "chat_ttft_probes_counted": len(among),
            f"chat_ttft_among_{n_clients}_ratio": busy / statistics.median(idle) if busy else None}


def run_serve_bench(model_path, slots: int = 16, slot_ctx: int = 2048, tokens: int = 64,
                    threads: int | None = None, flash_attn: bool = False, levels=LEVELS, rates=(),
                    goodput: dict[str, float] | None = None) -> dict:
    """Flash attention as given for both (llama-server would pick it by itself: `-fa auto`)."""
    model = resolve_model(model_path)
    threads = threads or os.cpu_count() or 2
    tools = llama_tools()
    if tools is None or not (tools / "llama-server").exists():
        raise ValueError("llama-server is not built: run packaging/build-llama-tools.sh")
    result: dict[str, Any] = {"model": model.name, "slots": slots, "slot_ctx": slot_ctx, "tokens": tokens,
                              "threads": threads, "flash_attn": flash_attn, "load_avg_1m": os.getloadavg()[0],
                              "tpot_definition": TPOT_DEFINITION}
    home = tempfile.mkdtemp(prefix="llamadesk-bench-serve-")
    # A private cache folder: the run starts cold, and never reads or writes the user's prompt cache.
    env = {**os.environ, "XDG_DATA_HOME": home, "XDG_CACHE_HOME": os.path.join(home, "cache")}
    port = free_port()
    ours = ServerProcess([sys.executable, "-m", "app", "serve", "--model", str(model), "--port", str(port),
                          "--parallel", str(slots), "--ctx", str(slot_ctx), "--threads", str(threads),
                          *(["--flash-attn"] if flash_attn else [])], port, env=env)
    try:
        mine = _sweeps(ours, tokens, levels, rates, goodput)
        mine["among"] = _ttft_among_clients(ours, 8, tokens)
        result.update(_ttft_during_batch(ours, slots, tokens))
    finally:
        ours.stop()
    port = free_port()
    theirs = ServerProcess([str(tools / "llama-server"), "-m", str(model), "--host", "127.0.0.1",
                            "--port", str(port), "-np", str(slots), "-c", str(slots * slot_ctx),
                            "-t", str(threads), "-fa", "on" if flash_attn else "off", "--no-webui",
                            "--metrics"],
                           port, env=tool_env({**os.environ, "LD_LIBRARY_PATH": str(tools)}))
    try:
        other = _sweeps(theirs, tokens, levels, rates, goodput)
        other["among"] = _ttft_among_clients(theirs, 8, tokens)
    finally:
        theirs.stop()
    result["llamadesk"], result["llama_server"] = mine["completion"], other["completion"]
    result["aggregate_ratio"] = _ratios(mine["completion"], other["completion"])
    result["chat"] = {"llamadesk": mine["chat"], "llama_server": other["chat"],
                      "aggregate_ratio": _ratios(mine["chat"], other["chat"])}
    if rates:
        result["rates"] = {"llamadesk": mine["rates"], "llama_server": other["rates"]}
    result["online_among_clients"] = {"llamadesk": mine["among"], "llama_server": other["among"]}
    result["targets"] = _targets(result, levels)
    return result


def _ratios(ours: dict, theirs: dict) -> dict:
    return {n: ours[n]["aggregate_tok_s"] / theirs[n]["aggregate_tok_s"] for n in ours}


def _targets(result: dict, levels) -> dict:
    """Issue 27's figures, for each server: 8 chat clients against one in aggregate decode (target
    >= 2), a chat request's TTFT while 8 chat clients decode against idle (target <= 2), and the
    p50 TTFT of the 8-client level against the 1-client level (its 8 requests arrive together);
    the completion load's too."""
    hi, lo = (str(8 if 8 in levels else max(levels)), str(min(levels)))
    out = {}
    for side in ("llamadesk", "llama_server"):
        among = result["online_among_clients"][side]
        out[f"chat_ttft_among_8_vs_idle_{side}"] = among["chat_ttft_among_8_ratio"]
        for dataset, runs in (("chat", result["chat"][side]), ("completion", result[side])):
            out[f"{dataset}_{hi}_vs_{lo}_{side}"] = runs[hi]["aggregate_tok_s"] / runs[lo]["aggregate_tok_s"]
            ttft_lo = runs[lo]["median_ttft_ms"]
            out[f"{dataset}_ttft_p50_{hi}_vs_{lo}_{side}"] = (runs[hi]["median_ttft_ms"] / ttft_lo
                                                              if ttft_lo > 0 else math.nan)
    return out
