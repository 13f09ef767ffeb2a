"""What llama.cpp runs on, and what it said while loading.

llama.cpp reports its reasons (unknown architecture, layers offloaded, a GPU
allocation that failed) only through its log callback. We capture that log so
errors can name the real cause and the window can show where layers went,
instead of printing llama.cpp's chatter over the user's terminal.
"""

from __future__ import annotations

import ctypes
import logging
import re
import threading
from collections import deque
from dataclasses import dataclass

import llama_cpp
import llama_cpp._logger  # noqa: F401  (installs its callback on import; we replace it below)

log = logging.getLogger("llamadesk.llama_cpp")
# Without a handler configured (tests, library use) nothing reaches stderr: this
# build logs routine context setup at WARN level, which is noise to a user.
logging.getLogger("llamadesk").addHandler(logging.NullHandler())

_LEVELS = {0: logging.CRITICAL, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR,
           4: logging.DEBUG}


class _LogTap:
    """Collects llama.cpp log lines into a ring buffer and the Python log."""

    def __init__(self, keep: int = 400):
        self.lines: deque[tuple[int, int, str]] = deque(maxlen=keep)
        self.count = 0
        self._partial = ""
        self._level = 1
        self._lock = threading.Lock()

    def __call__(self, level: int, text: bytes, _user) -> None:
        s = text.decode("utf-8", "replace") if text else ""
        with self._lock:
            if level != 5:  # 5 = continuation of the previous message
                self._level = level
            self._partial += s
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                if line.strip():
                    self.lines.append((self.count, self._level, line))
                    self.count += 1
                    py_level = _LEVELS.get(self._level, logging.DEBUG)
                    if log.isEnabledFor(py_level):
                        log.log(py_level, "%s", line)

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


def gpu_offload_supported() -> bool:
    return bool(llama_cpp.llama_supports_gpu_offload())


def compiled_backend() -> str:
    """The GPU backend compiled into this llama.cpp build, or "CPU"."""
    info = system_info()
    for name in ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL", "OpenCL"):
        if re.search(rf"\b{name}\b", info, re.IGNORECASE):
            return "Metal" if name == "Metal" else name
    return "GPU" if gpu_offload_supported() else "CPU"


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
    kinds = {0: "CPU", 1: "GPU", 2: "ACCEL", 3: "GPU"}
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
        import pathlib
        libdir = pathlib.Path(llama_cpp.__file__).parent / "lib"
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


def layers_offloaded(lines: list[tuple[int, str]]) -> tuple[int, int] | None:
    for _, line in reversed(lines):
        m = _OFFLOAD_RE.search(line)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def load_failure_reason(lines: list[tuple[int, str]]) -> str:
    """The most specific reason llama.cpp logged for a failed load."""
    for _, line in lines:
        m = _ARCH_RE.search(line)
        if m:
            return f"unsupported model architecture '{m.group(1)}' (this llama.cpp build cannot run it)"
    errors = [ln for lvl, ln in lines if lvl == 3]
    if errors:
        msg = errors[-1].split(": ", 1)[-1] if ": " in errors[-1] else errors[-1]
        return f"llama.cpp could not load it: {msg.strip()}"
    return "llama.cpp could not load it"
