"""Folds gpu-check.sh's raw outputs into one JSON summary, with the issue's ratios.

    python gpu_check_summary.py OUTDIR --backend cuda|cpu --build-s N --gpu TEXT --total-s N

Every ratio is of two figures from the same run on the same model: LlamaDesk's
decode against llama-bench's (the C++ ceiling, built from the same sources),
offloaded against CPU-only, batched against one request after another.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _read(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _llama_bench(rows: list[dict] | None) -> dict:
    if not rows:
        return {}
    pp = next((r for r in rows if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0), {})
    tg = next((r for r in rows if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0), {})
    return {"llama_bench_prefill_tok_s": pp.get("avg_ts"), "llama_bench_decode_tok_s": tg.get("avg_ts"),
            "llama_bench_backends": tg.get("backends"), "llama_bench_gpu_info": tg.get("gpu_info"),
            "llama_bench_n_gpu_layers": tg.get("n_gpu_layers")}


def _ratio(a, b):
    return a / b if a and b else None


def summarize(out: Path, backend: str, build_s: int, gpu: str, total_s: int) -> dict:
    offload, cpu = _read(out / "bench-offload.json"), _read(out / "bench-cpu.json")
    batch, ask = _read(out / "bench-batch.json"), _read(out / "ask.json")
    spec = _read(out / "bench-speculative.json")
    lb = _llama_bench(_read(out / "llama-bench.json"))
    s = {"backend": backend, "gpu": gpu, "build_s": build_s, "total_s": total_s,
         "model": _read(out / "model.json")}
    if offload:
        s.update({"runs_on": offload["runs_on"], "engine_decode_tok_s": offload["engine_decode_tok_s"],
                  "engine_prefill_tok_s": offload["engine_prefill_tok_s"],
                  "engine_ttft_s": offload["engine_ttft_s"], "raw_decode_tok_s": offload["raw_decode_tok_s"],
                  "decode_ratio_vs_raw_loop": offload["decode_ratio"]})
        for k in ("bytes_per_token", "peak_read_gbs", "peak_source", "achieved_read_gbs",
                  "decode_bw_utilization", "decode_ceiling_tok_s"):
            s[k] = offload.get(k)  # NVML's peak on a GPU (app.engine.utilization)
    s.update(lb)
    s["decode_vs_llama_bench"] = _ratio(s.get("engine_decode_tok_s"), lb.get("llama_bench_decode_tok_s"))
    if cpu:
        s.update({"cpu_runs_on": cpu["runs_on"], "cpu_engine_decode_tok_s": cpu["engine_decode_tok_s"],
                  "gpu_vs_cpu_decode": _ratio(s.get("engine_decode_tok_s"), cpu["engine_decode_tok_s"])})
    if batch:
        s.update({"batch_runs_on": batch["runs_on"], "batch_speedup": batch["batch_speedup"],
                  "batch_tok_s": batch["batch_tok_s"], "online_tok_s": batch["online_tok_s"],
                  "slot_sweep_tok_s": batch["slot_sweep_tok_s"]})
    if spec:
        s.update({"speculative_editing_speedup": spec.get("editing_speedup"),
                  "speculative_chat_speedup": spec.get("chat_speedup"),
                  "speculative_editing_acceptance_pct": (spec.get("editing") or {}).get("acceptance_pct")})
    if ask:
        s["ask_runs_on"] = ask.get("runs_on")
    return s


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--backend", required=True)
    p.add_argument("--build-s", type=int, required=True)
    p.add_argument("--gpu", required=True)
    p.add_argument("--total-s", type=int, required=True)
    a = p.parse_args()
    s = summarize(a.out, a.backend, a.build_s, a.gpu, a.total_s)
    print(json.dumps(s, indent=1))
    print(headline(s), file=sys.stderr)
    return 0


def headline(s: dict) -> str:
    """The one line that matters: LlamaDesk's decode against llama-bench's, same device, same run."""
    ratio = s.get("decode_vs_llama_bench")
    if not ratio:
        return "gpu-check: no decode ratio (see the raw outputs beside gpu-check.json)"
    return (f"gpu-check: {s.get('runs_on')} on {s.get('gpu')}: llamadesk bench decodes "
            f"{s['engine_decode_tok_s']:.2f} tok/s, llama-bench tg "
            f"{s['llama_bench_decode_tok_s']:.2f} tok/s: ratio {ratio:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
