"""Utilization, the third measurement: how close decoding runs to this machine's limits.

A decode step reads every weight once (an embedding lookup reads one row; a
tied output matrix is read in full as the output projection) plus the KV
cache up to the current position, so `bytes_per_token x tok/s` is the
bandwidth the step achieved, and `peak / bytes_per_token` is the fastest this
model can decode here. The peak comes from a short probe: threads summing
disjoint parts of a large array, which numpy does with the GIL released, the
way ggml's threads stream the weights. Kept in the cache folder per CPU and
thread count, because it is a property of the machine, not of a run.

Bytes are one roof; arithmetic is the other. A token also costs a multiply-add
per matmul weight (a large vocabulary's output matrix is most of a small
model's), plus attention's over the positions it reads, so where the kernels'
measured MAC rate (app.engine.compute_peak) is the lower roof, the bytes-only
ceiling would promise what the machine cannot keep. The ceiling is the lower of
the two, named.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from app.engine import machine_figures
from app.engine.gguf import GGUFHeader
from app.engine.macs import (
    attended_positions,
    attention_macs,
    head_dims,
    layer_macs,
    meta,
    output_macs,
)

BANDWIDTH_FILE = "bandwidth.json"
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
        vocab = meta(h, "vocab_size") or len(h.metadata.get("tokenizer.ggml.tokens") or ()) or 0
        if vocab:  # a separate output matrix: the embedding gives one row per token
            total -= embd[1] - embd[1] // vocab
    return total


def matmul_params(h: GGUFHeader) -> int:
    """Weights a prompt token multiplies through: all but the embedding (a lookup, no arithmetic)
    and the output matrix (prefill computes logits for the last token only)."""
    return sum(n for name, (n, _) in h.tensors.items() if name not in ("token_embd.weight", "output.weight"))


def kv_bytes(h: GGUFHeader, position: int, kv_type: str = "f16") -> int:
    """K and V read by every layer at `position` (attended_positions: a sliding window caps a layer)."""
    kv_heads = meta(h, "attention.head_count_kv") or meta(h, "attention.head_count") or 0
    k_len, v_len = head_dims(h)
    per_pos = kv_heads * (k_len + v_len) * KV_ELEMENT_BYTES.get(kv_type, 2.0)
    return int(per_pos * attended_positions(h, position))


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


def peak_bandwidth(threads: int, remeasure: bool = False) -> tuple[float, str]:
    """(bytes/s, where the figure comes from), measured once per CPU and thread count."""
    key = machine_figures.machine_key(threads)
    known = None if remeasure else machine_figures.read(BANDWIDTH_FILE, key)
    if known is not None:
        return known, f"probe ({threads} threads, measured earlier)"
    bw = machine_figures.keep(BANDWIDTH_FILE, key, probe_bandwidth(threads))
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


def peak_for(threads: int, remeasure: bool = False) -> tuple[float, str]:
    """peak_bandwidth, probed at most once per process and thread count unless `remeasure`
    (bench does, before it loads a model: a cached figure from a busy moment is raised)."""
    if threads not in _PEAKS or remeasure:
        _PEAKS[threads] = peak_bandwidth(threads, remeasure)
    return _PEAKS[threads]


@dataclass
class Roofs:
    """Both roofs of one decode at a position, and what a rate reached against each."""

    memory_tok_s: float  # peak bytes/s / bytes a step reads
    compute_tok_s: float | None  # peak MAC/s / MACs a token costs (None: no compute peak yet)
    memory_util: float | None  # the rate's bytes/s of the peak (None: no rate)
    compute_util: float | None  # the rate's MAC/s of the compute peak
    bytes_per_token: int
    macs_per_token: int

    @property
    def binds(self) -> str:
        """"memory" or "compute": the lower roof, the one the decode meets first."""
        if self.compute_tok_s is not None and self.compute_tok_s < self.memory_tok_s:
            return "compute"
        return "memory"

    @property
    def ceiling_tok_s(self) -> float:
        return self.compute_tok_s if self.binds == "compute" and self.compute_tok_s else self.memory_tok_s


@dataclass
class Limits:
    """A loaded model on this machine: what a step reads and computes, and how fast memory
    delivers it and the kernels do it."""

    header: GGUFHeader
    kv_type: str
    peak: float  # bytes/s
    source: str
    weights: int = 0
    params: int = 0
    decode_params: int = 0
    mac_peak: float | None = None  # MAC/s of the model's own kernels (app.engine.compute_peak)
    mac_source: str | None = None
    layer_macs: int = 0
    output_macs: int = 0

    def __post_init__(self) -> None:
        self.weights = weight_bytes(self.header)
        self.params = matmul_params(self.header)
        self.layer_macs = layer_macs(self.header)
        self.output_macs = output_macs(self.header)
        self.decode_params = self.params + self.output_macs  # every decoded token gets logits

    def macs(self, position: int) -> int:
        """Multiply-adds of a decoded token (logits included) at `position`."""
        return self.layer_macs + self.output_macs + attention_macs(self.header, position)

    def roofs(self, position: int, tok_s: float | None = None) -> Roofs:
        per_token = self.weights + kv_bytes(self.header, position, self.kv_type)
        macs = self.macs(position)
        compute = self.mac_peak / macs if self.mac_peak and macs else None
        mem_util = tok_s * per_token / self.peak if tok_s else None
        mac_util = tok_s * macs / self.mac_peak if tok_s and self.mac_peak else None
        return Roofs(self.peak / per_token, compute, mem_util, mac_util, per_token, macs)

    def batched_ceiling(self, positions: list[int], flop_s: float | None = None) -> tuple[float, str]:
        """(tok/s, what binds) for one step decoding a token for each sequence at `positions`.

        The step reads the weights once for all of them and each one's KV cache, so the
        bandwidth ceiling grows with the batch; the arithmetic rate caps it where the step
        turns compute-bound: `flop_s`, measured on prefill steps, against the parameters
        it was counted with (prefill_flop_s); without it the compute roof's probed MAC
        rate, against each token's MACs at its position as roofs() counts them."""
        n = len(positions)
        if n == 0:
            return 0.0, "bandwidth"
        step = self.weights + sum(kv_bytes(self.header, max(p, 1), self.kv_type) for p in positions)
        memory = n * self.peak / step
        compute = None
        if flop_s and self.decode_params:
            compute = flop_s / (2.0 * self.decode_params)
        elif self.mac_peak:
            compute = n * self.mac_peak / sum(self.macs(max(p, 1)) for p in positions)
        if compute is not None and compute < memory:
            return compute, "arithmetic"
        return memory, "bandwidth"

    def prefill_flop_s(self, tokens: int, seconds: float) -> float:
        """Arithmetic achieved by a prefill: 2 FLOPs (multiply, add) per parameter per token."""
        return 2.0 * self.params * tokens / seconds if seconds > 0 else 0.0

    def at(self, position: int, tok_s: float | None) -> tuple[float | None, float | None, float]:
        """(achieved bytes/s, memory utilization, ceiling tok/s: the lower roof) decoding at
        `tok_s` at `position`."""
        r = self.roofs(position, tok_s)
        if not tok_s:
            return None, None, r.ceiling_tok_s
        return tok_s * r.bytes_per_token, r.memory_util, r.ceiling_tok_s


def limits_for(model, compute: bool = False) -> Limits | None:
    """The Limits of a LoadedModel: the CPU's probed peak, or with every layer on an NVIDIA GPU
    that GPU's from NVML; None for a partial offload (two memories) or a GPU NVML cannot read.

    On the CPU the compute roof too (app.engine.compute_peak), where it was measured before on
    this machine and library (`llamadesk bench` measures it); `compute` True measures it now if
    not: seconds of prefill, too long to add to every model load."""
    report = model.report
    if report.layers_offloaded:
        got = gpu_peak() if report.layers_total and report.layers_offloaded >= report.layers_total else None
        if got is None:
            return None
        peak, source = got
        return Limits(model.header, model.options.kv_type, peak, source)
    peak, source = peak_for(report.n_threads)
    from app.engine.compute_peak import compute_peak

    got = compute_peak(model, measure=compute)
    mac_peak, mac_source = got if got is not None else (None, None)
    return Limits(model.header, model.options.kv_type, peak, source, mac_peak=mac_peak, mac_source=mac_source)
