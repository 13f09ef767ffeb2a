"""`python -m app.bench.serve_models --json`: what a multi-model `llamadesk serve` costs a request.

Two figures, each on a real server (a child process, private data and cache
folders) serving the bundled model and a llama-quantize Q8_0 copy of it
(`--models-max 2`, 2 slots of 2048 tokens):

- **cold load to first token**: the model unloaded (POST /models/unload), a
  streamed chat request for it, timed from sending to its first text: the
  load (weights, the engine's context) and the prefill together. Target
  under 1 s for the bundled model. The file is in the OS page cache after the
  first round, as it is for a server that loaded it before; the first round
  is reported apart.
- **switch to a loaded model**: both models loaded, the same short chat
  request alternating between them (every request a switch) against the same
  request to one model over and over; `switch_added_ms` = median TTFT of the
  alternating requests minus that of the repeated ones. Target under 50 ms.

Medians over `rounds`. The load time the server itself measured (GET /models'
`meta.load_s`) is reported beside the client's figure, and the server process's
CPU seconds over the cold span (every thread), which on a machine shared with
other work says what the cold start costs apart from the wait for a core.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.bench.fit import requantize
from app.bench.servers import ServerProcess, free_port
from app.engine.models import resolve_model

MESSAGES = [{"role": "user", "content": "Name a colour."}]
COLD_TARGET_S = 1.0
SWITCH_TARGET_MS = 50.0


def _ttft(http: httpx.Client, model: str) -> float:
    """Seconds from sending a streamed chat request to its first text."""
    body = {"model": model, "messages": MESSAGES, "max_tokens": 4, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"]
            if delta.get("content"):
                return time.perf_counter() - t0
    raise RuntimeError(f"{model}: the stream ended without text")


def _status(http: httpx.Client, model: str) -> dict:
    return next(m for m in http.get("/models").json()["data"] if m["id"] == model)


def _unload(http: httpx.Client, model: str) -> None:
    if _status(http, model)["status"]["value"] == "loaded":
        http.post("/models/unload", json={"model": model}).raise_for_status()


def _cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def measure(srv: ServerProcess, a: str, b: str, rounds: int) -> dict:
    with httpx.Client(base_url=srv.base, timeout=120) as http:
        cold, load, cpu = [], [], []
        for _ in range(rounds + 1):
            _unload(http, a)
            c0 = _cpu_s(srv.proc.pid)
            cold.append(_ttft(http, a))
            cpu.append(_cpu_s(srv.proc.pid) - c0)
            load.append(_status(http, a)["meta"]["load_s"])
        warm = [_ttft(http, a) for _ in range(rounds)]
        _ttft(http, b)  # both loaded now
        same = [_ttft(http, a) for _ in range(2 * rounds)]
        switch = [_ttft(http, m) for _ in range(rounds) for m in (b, a)]
        metrics = http.get("/metrics").text
    med = statistics.median
    result = {
        "models": [a, b],
        "rounds": rounds,
        "cold_load_first_token_s": round(med(cold[1:]), 4),
        "cold_load_first_token_first_round_s": round(cold[0], 4),
        "server_load_s": round(med(load[1:]), 4),
        # The server's CPU seconds over the same span (every thread): what the cold start costs
        # the machine, apart from how long other processes kept it waiting for a core.
        "cold_load_first_token_cpu_s": round(med(cpu[1:]), 4),
        "warm_ttft_s": round(med(warm), 4),
        "same_model_ttft_s": round(med(same), 4),
        "switch_ttft_s": round(med(switch), 4),
        "switch_added_ms": round(1000 * (med(switch) - med(same)), 2),
        "load_metric_present": "llamadesk_model_load_seconds_count" in metrics,
    }
    result["targets"] = {"cold_load_first_token_under_1s": result["cold_load_first_token_s"] < COLD_TARGET_S,
                         "switch_added_under_50ms": result["switch_added_ms"] < SWITCH_TARGET_MS}
    return result


def q8_copy(src: Path, dst: Path) -> str:
    """`src` requantized to Q8_0 at `dst` by llama.cpp's llama-quantize, or (the tools not built)
    by the function of the same llama.cpp it wraps, llama_model_quantize; which one, in words."""
    try:
        requantize(src, dst)
        return "Q8_0 copy (llama-quantize)"
    except ValueError:
        import llama_cpp

        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype, params.allow_requantize = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, True
        if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params) != 0:
            raise RuntimeError(f"llama_model_quantize could not requantize {src}") from None
        return "Q8_0 copy (llama_model_quantize)"


def run_serve_models_bench(model: str | None = None, rounds: int = 5, threads: int | None = None) -> dict:
    base = resolve_model(model)
    with tempfile.TemporaryDirectory(prefix="llamadesk-bench-models-") as tmp:
        copy = Path(tmp) / f"{base.stem}-Q8_0.gguf"
        second = q8_copy(base, copy)
        env = {**os.environ}
        for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            env[var] = str(Path(tmp) / var.lower())
        port = free_port()
        args = [sys.executable, "-m", "app", "serve", "--model", str(base), "--model", str(copy),
                "--models-max", "2", "--parallel", "2", "--ctx", "2048", "--port", str(port)]
        if threads:
            args += ["--threads", str(threads)]
        srv = ServerProcess(args, port, "/health", env)
        try:
            result = measure(srv, base.name, copy.name, rounds)
        finally:
            srv.stop()
        result["second_model"] = second
        return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.bench.serve_models", description=__doc__.split("\n")[0])
    p.add_argument("--model", metavar="PATH", help="GGUF file (default: the bundled model)")
    p.add_argument("--rounds", type=int, default=5, metavar="N")
    p.add_argument("--threads", type=int, metavar="N")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    result = run_serve_models_bench(args.model, max(args.rounds, 1), args.threads)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>38}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
