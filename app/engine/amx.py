"""Whether the loaded llama.cpp runs its AMX kernels, and why or why not, in one line.

Said in the Hardware settings, every bench and the log: a user whose CPU has AMX should
know whether it is used, and what to do when it is not (app.engine.library_choice).
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

from app.engine.library_choice import MARKER, cpu_has_amx

ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 0x1022, 0x1023, 18
SYS_ARCH_PRCTL = 158  # x86-64


def tile_data_allowed() -> bool:
    """Whether the kernel lets this process use AMX tile data (Linux asks for it per process;
    a kernel or hypervisor without AMX state refuses)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0:
        return False
    granted = ctypes.c_uint64(0)
    if libc.syscall(SYS_ARCH_PRCTL, ARCH_GET_XCOMP_PERM, ctypes.byref(granted)) != 0:
        return False
    return bool(granted.value & (1 << XFEATURE_XTILEDATA))


@dataclass(frozen=True)
class AmxState:
    on: bool
    reason: str  # one line, for the hardware panel, bench and the log

    def line(self) -> str:
        return f"{'on' if self.on else 'off'}: {self.reason}"


def amx_state(system_info: str, library: Path) -> AmxState:
    """Whether the loaded llama.cpp (`system_info`, loaded from `library`) runs its AMX kernels,
    and why or why not."""
    if not cpu_has_amx():
        return AmxState(False, "this CPU has no AMX")
    if "AMX_INT8 = 1" not in system_info:
        return AmxState(False, f"this llama.cpp build has no AMX kernels ({library}); the other repacked "
                               "kernels run")
    if not (library / MARKER).is_file():
        return AmxState(False, "pip's llama.cpp build has the unfixed AMX kernel, which crashes at the first "
                               "prompt (llama.cpp #20824): weights load without repacking; "
                               "packaging/build-llama-tools.sh builds the fixed one")
    if not tile_data_allowed():
        return AmxState(False, "the kernel refuses AMX tile data to this process; llama.cpp runs its other "
                               "repacked kernels")
    return AmxState(True, f"llama.cpp built here with LlamaDesk's AMX fix ({library})")
