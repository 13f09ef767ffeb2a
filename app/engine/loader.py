"""Loading a GGUF into llama.cpp, and saying truthfully where it runs.

The file is checked by our own GGUF reader first, so bad input gets a precise
reason. A GPU load that fails is retried on the CPU, and the fallback is part
of the returned report: GPT4All's silent CPU fallback is what we avoid.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import llama_cpp
from llama_cpp import Llama

from app.engine import backend, vocabulary
from app.engine.errors import ModelLoadError
from app.engine.gguf import GGUFHeader, read_header


def default_threads() -> int:
    # Every logical CPU, not llama-cpp-python's cpu_count // 2: that default
    # assumes two hardware threads per core, and where each logical CPU is a
    # core of its own (many VMs and containers) it leaves half the compute
    # idle. --threads overrides it; compare with `llamadesk bench --threads N`.
    return max(1, os.cpu_count() or 1)


@dataclass
class LoadOptions:
    n_ctx: int = 4096
    n_gpu_layers: int = -1  # -1 = all layers, 0 = CPU only
    n_threads: int | None = None
    flash_attn: bool = False
    n_batch: int = 512  # tokens per llama_decode call during prefill
    # llama.cpp's sliding-window cache holds n_swa + n_ubatch cells and every
    # SWA layer attends over all of them, so a smaller ubatch makes each step
    # after a long prefix cheaper, while a ubatch this size still keeps the
    # prefill matmuls large. `llamadesk bench` measures the turn after a prefix.
    n_ubatch: int = 256
    chat_template: str | None = None  # overrides the GGUF's template
    kv_type: str = "f16"  # KV-cache element type: f16, q8_0 or q4_0 (quantized V needs flash_attn)
    # With n_threads unset: decode on every core but one, prefill on all of them. The window
    # sets it: decode is bound by memory bandwidth, so one thread fewer costs it little,
    # while a thread per core leaves the GUI thread none to paint with.
    spare_core: bool = False

    def threads(self) -> int:
        """Threads of a decode step (one token per sequence)."""
        if self.n_threads:
            return self.n_threads
        return max(1, default_threads() - 1) if self.spare_core else default_threads()

    def batch_threads(self) -> int:
        """Threads of a prefill step: arithmetic-bound, so every core helps."""
        return self.n_threads or default_threads()


REPACK_BUFFERS = ("AMX", "CPU_REPACK")  # llama.cpp's names for its extra weight buffers


@dataclass
class LoadReport:
    """Shown in the window's model bar and printed by the CLI."""

    model_path: str
    backend: str  # "CPU", "CUDA", "Metal", ...
    gpu_offload_supported: bool
    n_gpu_layers_requested: int
    layers_offloaded: int
    layers_total: int | None
    fallback: str | None  # why a GPU load fell back to CPU, if it did
    load_s: float
    n_ctx: int
    n_threads: int  # decode
    devices: list[dict] = field(default_factory=list)
    n_threads_batch: int = 0  # prefill
    # What the load allocated on each GPU device, by part, as llama.cpp logged it
    # ({"Vulkan0": {"model": ..., "KV": ..., "compute": ...}}); empty when nothing went to one.
    device_buffers: dict[str, dict[str, int]] = field(default_factory=dict)
    # Weights llama.cpp repacked for its faster CPU kernels, bytes by buffer ("AMX", "CPU_REPACK");
    # empty when none were (no extra buffers, or none of the weights' types has such a kernel).
    repacked: dict[str, int] = field(default_factory=dict)
    amx: str = ""  # backend.amx().line(): AMX on or off, and why

    @property
    def threads_text(self) -> str:
        if self.n_threads_batch and self.n_threads_batch != self.n_threads:
            return f"threads {self.n_threads} decode, {self.n_threads_batch} prefill"
        return f"{self.n_threads} thread" + ("" if self.n_threads == 1 else "s")

    @property
    def runs_on(self) -> str:
        """Where the model runs and why, in the words the model bar, `ask` and the
        settings use: a build with a GPU backend and no usable GPU is not a CPU build."""
        gpu_build = self.backend not in ("CPU", "GPU") or self.gpu_offload_supported
        if self.layers_offloaded and gpu_build:
            total = f"/{self.layers_total}" if self.layers_total else ""
            return f"{self.backend} ({self.layers_offloaded}{total} layers on GPU)"
        if not gpu_build:
            return "CPU (this llama.cpp build has no GPU offload)"
        if self.n_gpu_layers_requested == 0:
            return "CPU (by choice: GPU layers set to 0)"
        if not self.gpu_offload_supported:
            return f"CPU ({self.backend} build, no usable GPU found)"  # the fallback line says more
        return "CPU"

    @property
    def gpu_device(self) -> str | None:
        """The device the offloaded layers went to, as llama.cpp names it ("NVIDIA H200",
        "llvmpipe (LLVM 15.0.6, 256 bits)"); None when no layer is on a GPU."""
        if not self.layers_offloaded:
            return None
        gpus = [d for d in self.devices if d.get("kind") == "GPU"]
        return (gpus[0].get("description") or gpus[0].get("name")) if gpus else self.backend

    def to_json(self) -> dict:
        d = asdict(self)
        d["runs_on"] = self.runs_on
        d["gpu_device"] = self.gpu_device
        return d


@dataclass
class LoadedModel:
    llm: Llama
    header: GGUFHeader
    options: LoadOptions
    report: LoadReport

    @property
    def rewinds(self) -> bool:
        """Whether a sequence's last positions can be dropped from its KV cache, as speculation
        drops the guesses a check rejected; a recurrent or hybrid model's state cannot go back."""
        m = self.llm.model
        return not (llama_cpp.llama_model_is_recurrent(m) or llama_cpp.llama_model_is_hybrid(m))

    def close(self) -> None:
        if self.llm.model is not None:
            vocabulary.closed(llama_cpp.llama_model_get_vocab(self.llm.model))
        self.llm.close()


KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0}


def _construct(path: Path, opts: LoadOptions, n_gpu_layers: int) -> Llama:
    return Llama(
        model_path=str(path),
        n_ctx=opts.n_ctx,
        n_batch=opts.n_batch,
        n_ubatch=min(opts.n_ubatch, opts.n_batch),
        n_threads=opts.threads(),
        n_threads_batch=opts.batch_threads(),
        n_gpu_layers=n_gpu_layers,
        flash_attn=opts.flash_attn,
        type_k=KV_TYPES[opts.kv_type],
        type_v=KV_TYPES[opts.kv_type],
        # Keep llama.cpp's small sliding-window cache: SWA layers attend over
        # every cell they hold, so a full-size one makes each step after a long
        # prefix slower. The price is that a rolled-back prefix may be gone,
        # so the decoder checks the window before reusing one.
        swa_full=False,
        verbose=False,
    )


# llama.cpp keeps n_ctx in a uint32 it rounds up to a multiple of 256, and ggml
# runs at most GGML_MAX_N_THREADS threads (ggml.h). ctypes wraps larger values
# silently, so a huge --ctx would become a tiny context that aborts the process.
MAX_N_CTX = 2**32 - 256
MAX_THREADS = 512
# llama.cpp reserves room for every batch token's logits (n_vocab floats each: 1 MiB for Gemma's
# 262k vocabulary), so a batch much past llama-server's 2048 only buys memory.
MAX_BATCH = 8192


def _check_limits(p: Path, opts: LoadOptions) -> None:
    if opts.kv_type not in KV_TYPES:
        raise ModelLoadError(p, f"the KV-cache type must be one of {', '.join(KV_TYPES)}, "
                                f"not {opts.kv_type!r}")
    if opts.kv_type != "f16" and not opts.flash_attn:
        raise ModelLoadError(p, f"a {opts.kv_type} KV cache needs flash attention (llama.cpp quantizes "
                                "the V cache only with it): turn flash attention on")
    if opts.n_ctx > MAX_N_CTX:
        raise ModelLoadError(p, f"a context length of {opts.n_ctx:,} tokens is more than llama.cpp "
                                f"can hold (at most {MAX_N_CTX:,}); lower the context length (--ctx)")
    if not 1 <= opts.n_batch <= MAX_BATCH or not 1 <= opts.n_ubatch <= MAX_BATCH:
        raise ModelLoadError(p, f"a batch of {max(opts.n_batch, opts.n_ubatch):,} tokens is outside 1 to "
                                f"{MAX_BATCH:,} (each batch token reserves its logits' memory)")
    if opts.threads() > MAX_THREADS:
        raise ModelLoadError(p, f"{opts.threads():,} threads is more than llama.cpp can run "
                                f"(at most {MAX_THREADS}); lower --threads")


def _no_device(opts: LoadOptions) -> str | None:
    """GPU layers asked of a build that has a GPU backend but found no device: said,
    in one line, rather than run on the CPU as if nothing had been asked."""
    gpu = backend.compiled_gpu_backend()
    if opts.n_gpu_layers == 0 or gpu is None:
        return None
    why = backend.gpu_init_failure()
    return (f"this llama.cpp build has {gpu}, but no usable GPU was found"
            f"{f' ({why})' if why else ''}; running on the CPU")


def _failure(mark: int, opts: LoadOptions, e: Exception) -> str:
    reason = backend.load_failure_reason(backend.TAP.since(mark), opts.n_ctx)
    return reason or f"llama.cpp could not load it ({e})"


def load_model(path: str | Path, opts: LoadOptions | None = None,
               header: GGUFHeader | None = None) -> LoadedModel:
    """`header`: the file's, read already (a server that loads it again spares the read)."""
    opts = opts or LoadOptions()
    header = header or read_header(path)  # raises ModelFileError with a precise reason
    p = header.path
    _check_limits(p, opts)
    backend.avoid_amx_repack()
    supported = backend.gpu_offload_supported()
    want_gpu = opts.n_gpu_layers != 0 and supported
    fallback = _no_device(opts) if not supported else None
    t0 = time.perf_counter()
    mark = backend.TAP.mark()
    try:
        llm = _construct(p, opts, opts.n_gpu_layers if want_gpu else 0)
    except (ValueError, RuntimeError, OSError) as e:
        reason = _failure(mark, opts, e)
        if not want_gpu:
            raise ModelLoadError(p, reason) from None
        fallback = f"GPU load failed ({reason}); running on CPU instead"
        mark = backend.TAP.mark()
        try:
            llm = _construct(p, opts, 0)
        except (ValueError, RuntimeError, OSError) as e2:
            raise ModelLoadError(p, _failure(mark, opts, e2)) from None
    load_s = time.perf_counter() - t0
    offl = backend.layers_offloaded(backend.TAP.since(mark)) if want_gpu and not fallback else None
    devs = backend.devices()
    gpus = {d.name for d in devs if d.kind == "GPU"}
    report = LoadReport(
        model_path=str(p),
        backend=backend.compiled_backend(),
        gpu_offload_supported=supported,
        n_gpu_layers_requested=opts.n_gpu_layers,
        layers_offloaded=offl[0] if offl else 0,
        layers_total=offl[1] if offl else header.metadata.get(f"{header.architecture}.block_count"),
        fallback=fallback,
        load_s=load_s,
        n_ctx=llm.n_ctx(),
        n_threads=opts.threads(),
        n_threads_batch=opts.batch_threads(),
        devices=[asdict(d) for d in devs],
        device_buffers=backend.device_buffers(backend.TAP.since(mark), gpus) if offl and offl[0] else {},
        repacked={name: parts.get("model", 0) for name, parts in
                  backend.device_buffers(backend.TAP.since(mark), set(REPACK_BUFFERS)).items()},
        amx=backend.amx().line(),
    )
    vocabulary.loaded(llama_cpp.llama_model_get_vocab(llm.model), p)
    return LoadedModel(llm, header, opts, report)
