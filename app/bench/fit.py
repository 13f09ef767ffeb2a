"""`llamadesk bench --fit`: app.hub.fit's predicted resident memory against what a real load takes.

For the bundled model and a Q8_0 copy of it made by llama.cpp's own llama-quantize (two
files whose weights differ by 15%), at two context lengths (whose KV caches differ by
4x): each load in a fresh child process, its resident set measured just before and just
after llama.cpp's load, so nothing an earlier load left behind is counted. The prediction
reads only the header, as it does before a download. Target: within +-10%.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from app.bench.servers import llama_tools
from app.engine.gguf import read_header
from app.engine.models import resolve_model
from app.hub.fit import predict

CONTEXTS = (2048, 16384)
TOLERANCE = 0.10

_MEASURE = """
import json, sys, psutil
from app.engine.gguf import read_header
from app.engine.loader import LoadOptions, load_model
path, ctx, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
read_header(path)
proc = psutil.Process()
before = proc.memory_info().rss
model = load_model(path, LoadOptions(n_ctx=ctx, n_gpu_layers=layers, n_threads=1))
after = proc.memory_info().rss
r = model.report
print(json.dumps({"before": before, "after": after, "n_ctx": model.llm.n_ctx(),
                  "device_buffers": r.device_buffers, "layers_offloaded": r.layers_offloaded,
                  "fallback": r.fallback}))
"""


def measure(path: Path, n_ctx: int, gpu_layers: int = 0) -> dict:
    """Resident bytes a load of `path` at `n_ctx` adds, in a fresh child process; with
    `gpu_layers`, also what llama.cpp allocated on each GPU device."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(n_ctx), str(gpu_layers)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"loading {path.name} at {n_ctx} tokens failed: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def requantize(src: Path, dst: Path, quant: str = "Q8_0") -> Path:
    tools = llama_tools()
    if tools is None or not (tools / "llama-quantize").exists():
        raise ValueError("llama-quantize is not built: run packaging/build-llama-tools.sh first")
    r = subprocess.run([str(tools / "llama-quantize"), "--allow-requantize", str(src), str(dst), quant],
                       capture_output=True, text=True, env={**os.environ, "LD_LIBRARY_PATH": str(tools)})
    if r.returncode != 0:
        raise RuntimeError(f"llama-quantize failed: {r.stderr.strip()[-300:]}")
    return dst


def run_fit_bench(model: str | None = None, contexts: tuple[int, ...] = CONTEXTS) -> dict:
    base = resolve_model(model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="llamadesk-fit-") as tmp:
        copy = requantize(base, Path(tmp) / f"{base.stem}-requantized-q8_0.gguf")
        for path in (base, copy):
            header = read_header(path)
            for n_ctx in contexts:
                p = predict(header, n_ctx)
                m = measure(path, n_ctx)
                measured = m["after"] - m["before"]
                rows.append({"model": path.name, "quant": header.quantization, "n_ctx": n_ctx,
                             "predicted_bytes": p.resident, "measured_bytes": measured,
                             "ratio": round(p.resident / measured, 4),
                             "predicted_parts": {"mapped": p.mapped, "repacked": p.repacked, "kv": p.kv,
                                                 "vocab": p.vocab, "logits": p.logits}})
    worst = max(abs(r["ratio"] - 1) for r in rows)
    out = {"fit": rows, "fit_max_error": round(worst, 4), "fit_within_10pct": worst <= TOLERANCE,
           "fit_measured": "RSS after the load minus before it, fresh process each, CPU only"}
    if gpu_device() is not None:
        out.update(fit_device(base, contexts))
        # Measured under a GPU build, the process's RSS holds the GPU driver's own memory too
        # (lavapipe's heaps, a CUDA context), which no GGUF header predicts.
        out["fit_measured"] += "; this build's GPU backend and driver are in the RSS as well"
    return out


def gpu_device() -> str | None:
    """The GPU device a load with layers offloaded would use (its description), or None."""
    from app.engine import backend

    if not backend.gpu_offload_supported():
        return None
    gpus = [d for d in backend.devices() if d.kind == "GPU"]
    return (gpus[0].description or gpus[0].name) if gpus else None


def fit_device(path: Path, contexts: tuple[int, ...]) -> dict:
    """The GPU half of the fit check: every layer offloaded, app.hub.fit's predicted device
    memory against the buffers llama.cpp allocated on the device (its own account of them,
    which a device whose driver reports no usage, lavapipe, still gives)."""
    header = read_header(path)
    rows = []
    for n_ctx in contexts:
        m = measure(path, n_ctx, gpu_layers=-1)
        if m["fallback"] or not m["device_buffers"]:
            raise RuntimeError(f"the GPU load of {path.name} put nothing on the device: {m['fallback']}")
        measured = sum(sum(parts.values()) for parts in m["device_buffers"].values())
        p = predict(header, n_ctx, gpu_layers=-1)
        rows.append({"model": path.name, "n_ctx": n_ctx, "layers_offloaded": m["layers_offloaded"],
                     "predicted_device_bytes": p.gpu, "measured_device_bytes": measured,
                     "ratio": round(p.gpu / measured, 4), "measured_parts": m["device_buffers"]})
    worst = max(abs(r["ratio"] - 1) for r in rows)
    return {"fit_device": rows, "fit_device_name": gpu_device(), "fit_device_max_error": round(worst, 4),
            "fit_device_within_10pct": worst <= TOLERANCE}
