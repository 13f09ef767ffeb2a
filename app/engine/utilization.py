"""Utilization, the third measurement: how close decoding runs to this machine's memory limit.

A decode step reads every weight once (an embedding lookup reads one row; a
tied output matrix is read in full as the output projection) plus the KV
cache up to the current position, so `bytes_per_token x tok/s` is the
bandwidth the step achieved, and `peak / bytes_per_token` is the fastest this
model can decode here. The peak comes from a short probe: threads summing
disjoint parts of a large array, which numpy does with the GIL released, the
way ggml's threads stream the weights. Kept in the cache folder per CPU and
thread count, because it is a property of the machine, not of a run.
"""

from __future__ import annotations

import json
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from app import atomic_file, paths, regular_files
from app.engine.gguf import GGUFHeader

PROBE_BYTES = 1 << 28  # 256 MiB: past the last-level cache of any common CPU, read in ~10 ms
KV_ELEMENT_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


@dataclass
class TokenBytes:
    weights: int  # read once per decode step
    kv: int  # the KV cache read at the given position
    position: int

    @property
    def total(self) -> int:
        return self.weights + self.kv


def weight_bytes(h: GGUFHeader) -> int:
    """What one decode step reads from the weights, by the tensor table."""
    total = sum(b for _, b in h.tensors.values())
    embd = h.tensors.get("token_embd.weight")
    if embd is not None and "output.weight" in h.tensors:
        vocab = _meta(h, "vocab_size") or len(h.metadata.get("tokenizer.ggml.tokens") or ()) or 0
        if vocab:  # a separate output matrix: the embedding gives one row per token
            total -= embd[1] - embd[1] // vocab
    return total


def matmul_params(h: GGUFHeader) -> int:
    """Weights a prompt token multiplies through: all but the embedding (a lookup, no arithmetic)
    and the output matrix (prefill computes logits for the last token only)."""
    return sum(n for name, (n, _) in h.tensors.items() if name not in ("token_embd.weight", "output.weight"))


def _meta(h: GGUFHeader, key: str):
    return h.metadata.get(f"{h.architecture}.{key}")


def kv_bytes(h: GGUFHeader, position: int, kv_type: str = "f16") -> int:
    """K and V read by every layer at `position`; a sliding-window layer reads its window only.

    Which layers slide is per architecture; llama.cpp's Gemma 3 has one full-attention
    layer in six, the only sliding pattern among the GGUF keys read here."""
    layers = _meta(h, "block_count") or 0
    kv_heads = _meta(h, "attention.head_count_kv") or _meta(h, "attention.head_count") or 0
    k_len = _meta(h, "attention.key_length") or 0
    v_len = _meta(h, "attention.value_length") or k_len
    if not k_len and _meta(h, "embedding_length") and _meta(h, "attention.head_count"):
        k_len = v_len = _meta(h, "embedding_length") // _meta(h, "attention.head_count")
    window = _meta(h, "attention.sliding_window")
    per_pos = kv_heads * (k_len + v_len) * KV_ELEMENT_BYTES.get(kv_type, 2.0)
    if window and h.architecture == "gemma3":
        full = layers // 6
        return int(per_pos * (full * position + (layers - full) * min(position, window)))
    return int(per_pos * layers * position)


def token_bytes(h: GGUFHeader, position: int, kv_type: str = "f16") -> TokenBytes:
    return TokenBytes(weight_bytes(h), kv_bytes(h, position, kv_type), position)


def probe_bandwidth(threads: int, size: int = PROBE_BYTES, rounds: int = 4) -> float:
    """Bytes per second the machine reads with `threads` threads: the best of `rounds`."""
    import numpy as np

    data = np.ones(size // 4, dtype=np.float32)
    parts = np.array_split(data, threads)
    best = 0.0
    for _ in range(rounds):
        start = threading.Barrier(threads + 1)

        def read(part, start=start):
            start.wait()
            part.sum()
        workers = [threading.Thread(target=read, args=(p,)) for p in parts]
        for w in workers:
            w.start()
        start.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        best = max(best, data.nbytes / (time.perf_counter() - t0))
    return best


def _key(threads: int) -> str:
    return f"{platform.machine()}|{platform.processor() or _cpu_model()}|{threads}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def peak_bandwidth(threads: int, remeasure: bool = False) -> tuple[float, str]:
    """(bytes/s, where the figure comes from), measured once per CPU and thread count."""
    try:
        f: Path | None = paths.cache_dir() / "bandwidth.json"
    except OSError:  # no cache folder: measure, and keep the figure for this run only
        f = None
    known = (regular_files.read_json_object(f) if f is not None else None) or {}
    key = _key(threads)
    if not remeasure and isinstance(known.get(key), (int, float)):
        return float(known[key]), f"probe ({threads} threads, measured earlier)"
    bw = probe_bandwidth(threads)
    known[key] = bw
    if f is not None:
        try:
            atomic_file.write_text(f, json.dumps(known, indent=1))
        except OSError:
            pass  # the figure still holds for this run
    return bw, f"probe ({threads} threads)"


def gpu_peak(index: int = 0) -> tuple[float, str] | None:
    """An NVIDIA GPU's peak memory bandwidth from NVML: its top memory clock x bus width x 2
    (double data rate); None where NVML cannot tell."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
        bits = pynvml.nvmlDeviceGetMemoryBusWidth(h)
        name = pynvml.nvmlDeviceGetName(h)
    except Exception:  # noqa: BLE001 - no library, driver or device: no figure
        return None
    if not mhz or not bits:
        return None
    name = name.decode() if isinstance(name, bytes) else name
    return mhz * 1e6 * 2 * bits / 8, f"NVML ({name}: {mhz} MHz x {bits}-bit)"


_PEAKS: dict[int, tuple[float, str]] = {}  # this process's figures, one probe per thread count


def peak_for(threads: int) -> tuple[float, str]:
    """peak_bandwidth, probed at most once per process and thread count."""
    if threads not in _PEAKS:
        _PEAKS[threads] = peak_bandwidth(threads)
    return _PEAKS[threads]


@dataclass
class Limits:
    """A loaded model on this machine: what a step reads, and how fast memory delivers it."""

    header: GGUFHeader
    kv_type: str
    peak: float  # bytes/s
    source: str
    weights: int = 0
    params: int = 0
    decode_params: int = 0

    def __post_init__(self) -> None:
        self.weights = weight_bytes(self.header)
        self.params = matmul_params(self.header)
        out = self.header.tensors.get("output.weight") or self.header.tensors.get("token_embd.weight")
        self.decode_params = self.params + (out[0] if out else 0)  # every decoded token gets logits

    def batched_ceiling(self, positions: list[int], flop_s: float | None = None) -> tuple[float, str]:
        """(tok/s, what binds) for one step decoding a token for each sequence at `positions`.

        The step reads the weights once for all of them and each one's KV cache, so the
        bandwidth ceiling grows with the batch; `flop_s`, the arithmetic rate measured
        on prefill steps, caps it where the step turns compute-bound."""
        n = len(positions)
        if n == 0:
            return 0.0, "bandwidth"
        step = self.weights + sum(kv_bytes(self.header, max(p, 1), self.kv_type) for p in positions)
        memory = n * self.peak / step
        if flop_s and self.decode_params:
            compute = flop_s / (2.0 * self.decode_params)
            if compute < memory:
                return compute, "arithmetic"
        return memory, "bandwidth"

    def prefill_flop_s(self, tokens: int, seconds: float) -> float:
        """Arithmetic achieved by a prefill: 2 FLOPs (multiply, add) per parameter per token."""
        return 2.0 * self.params * tokens / seconds if seconds > 0 else 0.0

    def at(self, position: int, tok_s: float | None) -> tuple[float | None, float | None, float]:
        """(achieved bytes/s, utilization, ceiling tok/s) decoding at `tok_s` at `position`."""
        per_token = self.weights + kv_bytes(self.header, position, self.kv_type)
        ceiling = self.peak / per_token
        if not tok_s:
            return None, None, ceiling
        return tok_s * per_token, tok_s * per_token / self.peak, ceiling


def limits_for(model) -> Limits | None:
    """The Limits of a LoadedModel: the CPU's probed peak, or with every layer on an NVIDIA GPU
    that GPU's from NVML; None for a partial offload (two memories) or a GPU NVML cannot read."""
    report = model.report
    if report.layers_offloaded:
        got = gpu_peak() if report.layers_total and report.layers_offloaded >= report.layers_total else None
        if got is None:
            return None
        peak, source = got
        return Limits(model.header, model.options.kv_type, peak, source)
    peak, source = peak_for(report.n_threads)
    return Limits(model.header, model.options.kv_type, peak, source)
