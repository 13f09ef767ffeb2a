"""What this machine has free: RAM (psutil), GPU memory and disk.

GPU memory is NVML's where an NVIDIA GPU is there, else what llama.cpp's own GPU backend says of
its devices (an AMD or Intel GPU on Vulkan, NVIDIA without NVML): the fit check must count the
memory of the device the layers will really go to, not only a vendor's.

"Available" RAM is psutil's figure, not "free": the page cache a model's pages would evict
is available to it, and a mapped GGUF is itself page cache.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def free_ram() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - a platform psutil cannot read: no figure, not a crash
        return None


def free_vram() -> int | None:
    """Free memory summed over the GPUs llama.cpp would split layers across, or None: NVML's
    figure for NVIDIA GPUs, else the backend's devices' own (backend_vram)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        if n:
            return sum(int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).free)
                       for i in range(n))
    except Exception:  # noqa: BLE001 - no library, driver or device: ask the backend
        pass
    return backend_vram()


def backend_vram() -> int | None:
    """Free memory of the GPU devices this llama.cpp build registered (ggml's own figure), or None
    when it has none or says no figure. Asking may start the GPU driver: never on the GUI thread."""
    from app.engine import backend

    free = [d.memory_free for d in backend.devices() if d.kind == "GPU" and d.memory_free]
    return sum(free) if free else None


def gpu_layers_used(requested: int) -> int:
    """The layers a load would really offload: none unless llama.cpp was built with a GPU backend
    and a GPU is there to take them."""
    if requested == 0:
        return 0
    from app.engine import backend

    return requested if backend.gpu_offload_supported() and free_vram() is not None else 0


def free_disk(folder: Path) -> int:
    """Free bytes on the file system `folder` is on (its nearest existing parent)."""
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free
