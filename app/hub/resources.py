"""What this machine has free: RAM (psutil), GPU memory (NVML, where an NVIDIA GPU and a llama.cpp
build that offloads are both present) and disk.

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
    """Free memory summed over the NVIDIA GPUs llama.cpp would split layers across, or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        return sum(int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).free)
                   for i in range(n)) if n else None
    except Exception:  # noqa: BLE001 - no library, driver or device
        return None


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
