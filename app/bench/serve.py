"""`llamadesk bench --serve`: `llamadesk serve` under load, against llama.cpp's llama-server.

Both servers run in this one benchmark, one after the other, on the same
model, slot count and per-slot context, and take the same load: 1, 4, 8 and
16 concurrent streaming clients, each request greedy, exactly `tokens` long,
without repeat penalty (the two servers' penalty samplers differ in cost, and
that is not what is compared). Then, on LlamaDesk's server alone: online
TTFT while a Batch API batch fills every slot, against TTFT when idle.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from app.bench.servers import ServerProcess, free_port, llama_tools
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
    """One streaming request: (TTFT, tokens received, prompt tokens the server counted).

    The sweep sends the same raw text to /v1/completions of both servers, so both
    evaluate the same tokens: the chat endpoint would wrap it in each server's own
    prompt format (LlamaDesk's transcript for a model without a chat template is
    three times llama-server's chatml fallback), and that is not what is compared."""
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


def _load(base: str, model: str, n_clients: int, tokens: int) -> dict:
    with clients(base, n_clients) as http:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(n_clients) as pool:
            rows = list(pool.map(lambda i: _one(http, model, i, tokens), range(n_clients * 2)))
        wall = time.perf_counter() - t0
    ttfts = sorted(t for t, _, _ in rows if t is not None)
    p95 = ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))] if ttfts else None
    return {"requests": len(rows), "aggregate_tok_s": sum(n for _, n, _ in rows) / wall,
            "prompt_tokens": statistics.mean(p for _, _, p in rows),
            "p50_ttft_s": statistics.median(ttfts) if ttfts else None, "p95_ttft_s": p95}


def _sweep(srv: ServerProcess, tokens: int) -> dict:
    with clients(srv.base, 1) as http:
        _one(http, srv.model, -1, 4)  # warm up
    return {str(n): _load(srv.base, srv.model, n, tokens) for n in LEVELS}


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


def run_serve_bench(model_path, slots: int = 16, slot_ctx: int = 2048, tokens: int = 64,
                    threads: int | None = None, flash_attn: bool = False) -> dict:
    """Flash attention as given for both (llama-server would pick it by itself: `-fa auto`)."""
    model = resolve_model(model_path)
    threads = threads or os.cpu_count() or 2
    tools = llama_tools()
    if tools is None or not (tools / "llama-server").exists():
        raise ValueError("llama-server is not built: run packaging/build-llama-tools.sh")
    result: dict[str, Any] = {"model": model.name, "slots": slots, "slot_ctx": slot_ctx, "tokens": tokens,
                              "threads": threads, "flash_attn": flash_attn}
    home = tempfile.mkdtemp(prefix="llamadesk-bench-serve-")
    port = free_port()
    ours = ServerProcess([sys.executable, "-m", "app", "serve", "--model", str(model), "--port", str(port),
                          "--parallel", str(slots), "--ctx", str(slot_ctx), "--threads", str(threads),
                          *(["--flash-attn"] if flash_attn else [])],
                         port, env={**os.environ, "XDG_DATA_HOME": home})
    try:
        result["llamadesk"] = _sweep(ours, tokens)
        result.update(_ttft_during_batch(ours, slots, tokens))
    finally:
        ours.stop()
    port = free_port()
    theirs = ServerProcess([str(tools / "llama-server"), "-m", str(model), "--host", "127.0.0.1",
                            "--port", str(port), "-np", str(slots), "-c", str(slots * slot_ctx),
                            "-t", str(threads), "-fa", "on" if flash_attn else "off", "--no-webui"],
                           port, env=tool_env({**os.environ, "LD_LIBRARY_PATH": str(tools)}))
    try:
        result["llama_server"] = _sweep(theirs, tokens)
    finally:
        theirs.stop()
    result["aggregate_ratio"] = {n: result["llamadesk"][n]["aggregate_tok_s"] /
                                 result["llama_server"][n]["aggregate_tok_s"] for n in result["llamadesk"]}
    return result

