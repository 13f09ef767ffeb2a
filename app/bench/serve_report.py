"""`bench --serve` as tables: one row per run, the field's columns (times in ms)."""

from __future__ import annotations

import math

COLUMNS = (("conc", None), ("rate", None), ("done", None), ("req/s", "request_throughput"),
           ("out tok/s", "output_throughput"), ("TTFT p50", "median_ttft_ms"), ("p90", "p90_ttft_ms"),
           ("p99", "p99_ttft_ms"), ("TPOT p50", "median_tpot_ms"), ("p99", "p99_tpot_ms"),
           ("ITL p50", "median_itl_ms"), ("p99", "p99_itl_ms"), ("E2EL p50", "median_e2el_ms"),
           ("p99", "p99_e2el_ms"), ("goodput", "request_goodput"))


def _cell(run: dict, head: str, key: str | None) -> str:
    if head == "conc":
        return str(run.get("max_concurrency") or "-")
    if head == "rate":
        return str(run.get("request_rate"))
    if head == "done":
        return f"{run['completed']}/{run['completed'] + run['failed']}"
    v = run.get(key) if key else None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if key in ("request_throughput", "request_goodput"):
        return f"{v:.2f}"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def table(runs: list[dict], title: str = "") -> str:
    rows = [[h for h, _ in COLUMNS]] + [[_cell(r, h, k) for h, k in COLUMNS] for r in runs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [" ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(([title] if title else []) + lines)


def comparison(result: dict) -> str:
    """The two servers' runs, both datasets, the TTFT-during-batch figures and the targets."""
    out = [f"{result['model']} · {result['slots']} slots of {result['slot_ctx']} · {result['tokens']} tokens "
           f"a request · {result['threads']} threads · load {result['load_avg_1m']:.1f} · "
           f"TPOT: {result['tpot_definition']}"]
    for dataset, ours, theirs in (("completion", result["llamadesk"], result["llama_server"]),
                                  ("chat", result["chat"]["llamadesk"], result["chat"]["llama_server"])):
        for side, runs in (("LlamaDesk", ours), ("llama-server", theirs)):
            out.append(table(list(runs.values()), f"\n{dataset} · {side}"))
    for side, by_dataset in (result.get("rates") or {}).items():
        for dataset, runs in by_dataset.items():
            out.append(table(runs, f"\n{dataset} · {side} · Poisson arrivals"))
    out.append("")
    for k in ("online_ttft_idle_s", "online_ttft_during_batch_s", "online_ttft_ratio", "batch_still_running"):
        out.append(f"{k:>36}: {result.get(k)}")
    for side, among in result["online_among_clients"].items():
        out.append(f"{side:>36}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in among.items()))
    for k, v in result["targets"].items():
        out.append(f"{k:>44}: " + ("-" if v is None else f"{v:.2f}"))
    return "\n".join(out)
