"""What llama.cpp runs on, and what it said while loading.

llama.cpp reports its reasons (unknown architecture, layers offloaded, a GPU
allocation that failed) only through its log callback. We capture that log so
errors can name the real cause and the window can show where layers went,
instead of printing llama.cpp's chatter over the user's terminal.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import llama_cpp._logger

from app.engine.amx import AmxState, amx_state
from app.engine.gguf import human_size
from app.engine.library_choice import MARKER, cpu_has_amx

log = logging.getLogger("llamadesk.llama_cpp")
# Without a handler configured (tests, library use) nothing reaches stderr:
# llama.cpp's chatter is for the log file, never the user's terminal.
logging.getLogger("llamadesk").addHandler(logging.NullHandler())

# enum ggml_log_level in the ggml.h this llama.cpp build ships (include/ggml.h;
# the comment in llama_cpp/_logger.py still lists an older order).
GGML_NONE, GGML_DEBUG, GGML_INFO, GGML_WARN, GGML_ERROR, GGML_CONT = range(6)
_LEVELS = {GGML_NONE: logging.INFO, GGML_DEBUG: logging.DEBUG, GGML_INFO: logging.INFO,
           GGML_WARN: logging.WARNING, GGML_ERROR: logging.ERROR}
# What llama.cpp reports as errors when LlamaDesk aborts a batch step on purpose for an online
# request (app.slots.engine; 1 is GGML_STATUS_ABORTED, 2 llama_decode's "aborted").
EXPECTED_PREFIXES = ("decode: removing memory module entries", "llama_decode: failed to decode, ret = 2",
                     "graph_compute: ggml_backend_sched_graph_compute_async failed with error 1",
                     "process_ubatch: failed to compute graph, compute status: 1")


class _LogTap:
    """Collects llama.cpp log lines into a ring buffer and the Python log."""

    def __init__(self, keep: int = 400):
        self.lines: deque[tuple[int, int, str]] = deque(maxlen=keep)
        self.count = 0
        self._partial = ""
        self._level = GGML_INFO
        self._lock = threading.Lock()

    def __call__(self, level: int, text: bytes, _user) -> None:
        s = text.decode("utf-8", "replace") if text else ""
        with self._lock:
            if level != GGML_CONT:
                # A new message: whatever the last one left unterminated keeps its own level.
                if self._partial:
                    self._emit(self._partial)
                    self._partial = ""
                self._level = level
            self._partial += s
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                self._emit(line)

    def _emit(self, line: str) -> None:
        if not line.strip():
            return
        py_level = _LEVELS.get(self._level, logging.DEBUG)
        if line.lstrip().startswith(EXPECTED_PREFIXES):
            py_level = logging.DEBUG
        if log.isEnabledFor(py_level):
            log.log(py_level, "%s", line)
        if self._level == GGML_DEBUG:
            return  # hundreds per load: in the ring they would push out the error and offload lines
        self.lines.append((self.count, self._level, line))
        self.count += 1

    def mark(self) -> int:
        """A position to later ask for the lines logged since."""
        with self._lock:
            return self.count

    def since(self, mark: int) -> list[tuple[int, str]]:
        with self._lock:
            return [(lvl, line) for seq, lvl, line in self.lines if seq >= mark]


TAP = _LogTap()
_CALLBACK = llama_cpp.llama_log_callback(TAP)  # must stay referenced for the process lifetime
llama_cpp.llama_log_set(_CALLBACK, ctypes.c_void_p(0))


def system_info() -> str:
    return llama_cpp.llama_print_system_info().decode("utf-8", "replace")


# llama.cpp's AMX matrix kernel crashes at the first prompt as pip builds it (llama.cpp #20824;
# packaging/llama_patches.py has the fix, library_choice loads the build that has it).
AMX_MARK = "AMX_INT8 = 1"
_repack_lock = threading.Lock()
_repack_off = False
_amx: AmxState | None = None


def amx() -> AmxState:
    """Whether this process's llama.cpp runs its AMX kernels, and why (hardware panel, bench)."""
    global _amx
    if _amx is None:
        _amx = amx_state(system_info(), library_dir())
    return _amx


def avoid_amx_repack() -> bool:
    """Load every later model without llama.cpp's extra weight buffers (the AMX repack among
    them) when this build's AMX kernel is the unfixed one; True when that is so. Idempotent.

    llama-cpp-python's Llama takes no `use_extra_bufts`, so its default model parameters are
    wrapped instead. A fixed build keeps them: the AMX buffer where the kernel grants tile
    data, llama.cpp's other repacked kernels where it does not.
    """
    global _repack_off
    with _repack_lock:
        if _repack_off:
            return True
        if AMX_MARK not in system_info() or (library_dir() / MARKER).is_file():
            return False
        from llama_cpp import llama_cpp as lib

        default = lib.llama_model_default_params

        def without_extra_bufts():
            params = default()
            params.use_extra_bufts = False
            return params

        lib.llama_model_default_params = without_extra_bufts
        llama_cpp.llama_model_default_params = without_extra_bufts
        _repack_off = True
        log.info("AMX %s", amx().line())
        return True


def tool_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for one of llama.cpp's tools run from the folder its LD_LIBRARY_PATH names: no
    weight repack where that build's AMX kernel is the unfixed one on this CPU."""
    folder = Path((env.get("LD_LIBRARY_PATH") or "").split(os.pathsep)[0] or ".")
    unfixed = cpu_has_amx() and not (folder / MARKER).is_file()
    return {**env, "LLAMA_ARG_REPACK": "0"} if unfixed else dict(env)


def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


# The backend libraries llama-cpp-python ships beside libllama (llama_cpp/lib).
GPU_LIBRARIES = {"cuda": "CUDA", "metal": "Metal", "vulkan": "Vulkan", "hip": "ROCm", "sycl": "SYCL",
                 "opencl": "OpenCL"}


def library_dir() -> Path:
    """The folder llama-cpp-python loaded libllama from: its own lib/ folder, or the one
    LLAMA_CPP_LIB_PATH names (a GPU build of the same llama.cpp beside the CPU wheel,
    packaging/build-vulkan.sh)."""
    loaded = getattr(llama_cpp.llama_cpp, "_base_path", None)
    return Path(loaded) if loaded else Path(llama_cpp.__file__).parent / "lib"


def compiled_gpu_backend(libdir: Path | None = None) -> str | None:
    """The GPU backend this build has compiled in, whether or not it found a device.

    llama_supports_gpu_offload() is False both for a CPU-only build and for a
    CUDA build on a machine with no usable GPU; telling a user the second is
    the first sends them rebuilding what is already there. The backend's own
    library beside libllama says which it is.
    """
    libdir = libdir or library_dir()
    try:
        names = [f.name.lower() for f in libdir.iterdir()]
    except OSError:
        names = []
    for key, label in GPU_LIBRARIES.items():
        if any(n.startswith((f"libggml-{key}.", f"ggml-{key}.")) for n in names):
            return label
    info = system_info()  # a static build names its backends here instead
    for label in ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL", "OpenCL"):
        if re.search(rf"\b{label}\b", info, re.IGNORECASE):
            return "ROCm" if label == "HIP" else label
    return None


def compiled_backend() -> str:
    """The GPU backend compiled into this llama.cpp build, or "CPU"."""
    return compiled_gpu_backend() or ("GPU" if gpu_offload_supported() else "CPU")


def gpu_init_failure() -> str | None:
    """What the GPU backend logged when it found no usable device, if it did
    (e.g. CUDA's "failed to initialize CUDA: CUDA driver version is insufficient")."""
    with TAP._lock:
        lines = [line for _seq, _lvl, line in TAP.lines]
    for line in reversed(lines):
        if re.search(r"failed to initiali[sz]e|no (CUDA|Vulkan|GPU)[- ]capable device|no devices? found",
                     line, re.IGNORECASE):
            return line.strip()
    return None


@dataclass
class Device:
    name: str
    description: str
    kind: str  # "CPU", "GPU", "ACCEL"
    memory_free: int | None
    memory_total: int | None


def devices() -> list[Device]:
    """Backend devices as ggml registers them (GPU name and memory where known).

    llama-cpp-python binds no ggml_backend_dev_* functions, so we bind the few
    we need from libggml ourselves; if that fails we report nothing rather
    than guess.
    """
    try:
        lib = _ggml_lib()
    except OSError:
        return []
    out: list[Device] = []
    # enum ggml_backend_dev_type (ggml-backend.h): CPU, GPU, IGPU (an integrated GPU on host
    # memory), ACCEL (BLAS, AMX: beside the CPU), META (a split over several devices).
    kinds = {0: "CPU", 1: "GPU", 2: "GPU", 3: "ACCEL"}
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        out.append(Device(
            name=(lib.ggml_backend_dev_name(dev) or b"").decode(),
            description=(lib.ggml_backend_dev_description(dev) or b"").decode(),
            kind=kinds.get(lib.ggml_backend_dev_type(dev), "?"),
            memory_free=free.value or None,
            memory_total=total.value or None,
        ))
    return out


_GGML = None


def _ggml_lib():
    global _GGML
    if _GGML is None:
        libdir = library_dir()
        cands = sorted(libdir.glob("libggml.*")) + sorted(libdir.glob("ggml.dll"))
        if not cands:
            raise OSError("libggml not found")
        lib = ctypes.CDLL(str(cands[0]))
        vp = ctypes.c_void_p
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
        lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        lib.ggml_backend_dev_get.restype = vp
        for fn in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
            getattr(lib, fn).argtypes = [vp]
            getattr(lib, fn).restype = ctypes.c_char_p
        lib.ggml_backend_dev_type.argtypes = [vp]
        lib.ggml_backend_dev_type.restype = ctypes.c_int
        lib.ggml_backend_dev_memory.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.POINTER(ctypes.c_size_t)]
        lib.ggml_backend_dev_memory.restype = None
        _GGML = lib
    return _GGML


_OFFLOAD_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_ARCH_RE = re.compile(r"unknown model architecture: '([^']*)'")
_ALLOC_RE = re.compile(r"failed to allocate|insufficient memory|out of memory|cannot allocate|bad_alloc",
                       re.I)
_CONTEXT_RE = re.compile(r"\bkv\b|kv.?cache|context", re.I)
_SIZE_RE = re.compile(r"buffer of size (\d+)")
_MB_RE = re.compile(r"allocate ([\d.]+) MB")
# Lines that only say that something failed, logged after the line saying why.
_GENERIC_RE = re.compile(r"failed to (?:load model|create context)\s*$|failed to initialize the context\s*$",
                         re.I)


# llama.cpp names each buffer it allocates, by the backend buffer's name ("Vulkan0", "CUDA0",
# "CPU_Mapped", "Vulkan_Host"), and its size in MiB: the one account of what a load put where.
_BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute|output|RS) buffer size\s*=\s*([\d.]+) MiB")


def device_buffers(lines: list[tuple[int, str]], names: set[str]) -> dict[str, dict[str, int]]:
    """Bytes llama.cpp said it allocated on each device named in `names` (the GPU devices'
    names), by part ("model", "KV", "compute", "output"): what a load really takes of device
    memory, as the fit check predicts it. A host buffer (CPU_Mapped, Vulkan_Host) is not a
    device's, whatever backend pinned it."""
    out: dict[str, dict[str, int]] = {}
    for _, line in lines:
        for m in _BUFFER_RE.finditer(line):
            name, part, mib = m.group(1), m.group(2), float(m.group(3))
            if name in names:
                parts = out.setdefault(name, {})
                parts[part] = parts.get(part, 0) + int(mib * 2**20)
    return out


def layers_offloaded(lines: list[tuple[int, str]]) -> tuple[int, int] | None:
    for _, line in reversed(lines):
        m = _OFFLOAD_RE.search(line)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def _alloc_bytes(lines: list[str]) -> int | None:
    """The largest allocation llama.cpp said it could not make."""
    sizes = [int(m.group(1)) for ln in lines for m in _SIZE_RE.finditer(ln)]
    sizes += [int(float(m.group(1)) * 2**20) for ln in lines for m in _MB_RE.finditer(ln)]
    return max(sizes, default=None)


def _alloc_failure(errors: list[str], n_ctx: int | None) -> str | None:
    failed = [ln for ln in errors if _ALLOC_RE.search(ln)]
    if not failed:
        return None
    size = _alloc_bytes(failed)
    amount = human_size(size) if size else "memory"
    if any(_CONTEXT_RE.search(ln) for ln in errors):
        ctx = f" of a {n_ctx:,}-token context" if n_ctx else ""
        return (f"failed to allocate {amount} for the KV cache{ctx}; "
                "lower the context length (--ctx, or Context length in Settings)")
    return (f"failed to allocate {amount} (not enough memory); "
            "use fewer GPU layers, a smaller context length or a smaller model")


def load_failure_reason(lines: list[tuple[int, str]], n_ctx: int | None = None) -> str:
    """The most specific reason llama.cpp logged for a failed load, or "" if it gave none.

    Only ERROR lines count: a load that fails usually warns first about
    something harmless (a context longer than the model was trained on), and
    that warning is not why it failed. The first specific error is the cause;
    the lines after it are callers saying that they failed too.
    """
    for _, line in lines:
        m = _ARCH_RE.search(line)
        if m:
            return f"unsupported model architecture '{m.group(1)}' (this llama.cpp build cannot run it)"
    errors = [ln for lvl, ln in lines if lvl == GGML_ERROR]
    alloc = _alloc_failure(errors, n_ctx)
    if alloc:
        return f"llama.cpp could not load it: {alloc}"
    specific = [ln for ln in errors if not _GENERIC_RE.search(ln)] or errors
    if not specific:
        return ""
    msg = specific[0].split(": ", 1)[-1] if ": " in specific[0] else specific[0]
    return f"llama.cpp could not load it: {msg.strip()}"
