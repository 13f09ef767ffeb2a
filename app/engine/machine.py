"""The machine while it decodes: CPU use overall and per core, this process's memory (psutil),
and on NVIDIA GPUs their use, memory, power and temperature (NVML, nvidia-ml-py). Where NVML
sees no GPU but llama.cpp's backend has one (Vulkan on AMD or Intel, Mesa's lavapipe, Metal),
the GPU row comes from the backend instead: its device name and memory, which is all ggml
can tell (no use, power or temperature), so that row is never "no NVIDIA GPU" beside a model
running on a GPU.

Sampled on a thread of its own every half second, never on the GUI thread,
which only reads the latest sample. Where a figure cannot be read (no NVIDIA
driver, a counter the platform lacks) the sample says so instead of showing 0.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

SAMPLE_S = 0.5


@dataclass(frozen=True)
class GpuSample:
    name: str
    util_pct: float | None
    mem_used: int | None
    mem_total: int | None
    power_w: float | None
    temp_c: float | None


@dataclass(frozen=True)
class MachineSample:
    cpu_pct: float
    per_core: tuple[float, ...]
    rss: int
    gpus: tuple[GpuSample, ...] = ()
    gpu_note: str | None = None  # why there is no GPU figure ("no NVIDIA GPU"), if there is none
    gpu_source: str = "NVML"  # where the GPU figures came from: "NVML", or the backend's name


@dataclass
class _Nvml:
    handles: list = field(default_factory=list)
    note: str | None = None

    @classmethod
    def open(cls) -> _Nvml:
        try:
            import pynvml

            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
        except Exception as e:  # noqa: BLE001 - no library, no driver, no device: all mean no figures
            text = str(e) or type(e).__name__
            why = "no NVIDIA GPU" if "Not Found" in text or "Driver" in text else f"NVML: {text}"
            return cls(note=why)
        if n == 0:
            return cls(note="no NVIDIA GPU")
        return cls([pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)])

    def read(self) -> tuple[GpuSample, ...]:
        import pynvml

        out = []
        for h in self.handles:
            def get(f, *a, h=h):
                try:
                    return f(h, *a)
                except pynvml.NVMLError:
                    return None
            name = get(pynvml.nvmlDeviceGetName) or "NVIDIA GPU"
            util = get(pynvml.nvmlDeviceGetUtilizationRates)
            mem = get(pynvml.nvmlDeviceGetMemoryInfo)
            power = get(pynvml.nvmlDeviceGetPowerUsage)
            temp = get(pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU)
            out.append(GpuSample(name if isinstance(name, str) else name.decode(),
                                 float(util.gpu) if util else None, mem.used if mem else None,
                                 mem.total if mem else None, power / 1000 if power is not None else None,
                                 float(temp) if temp is not None else None))
        return tuple(out)


def backend_gpus() -> tuple[GpuSample, ...]:
    """The GPU devices ggml registers, with their memory; none on a CPU-only build or where
    the library cannot be asked."""
    from app.engine import backend

    try:
        devs = [d for d in backend.devices() if d.kind == "GPU"]
    except Exception:  # noqa: BLE001 - a library that cannot be asked has no figures to give
        return ()
    return tuple(GpuSample(
        d.description or d.name, None,
        d.memory_total - d.memory_free if d.memory_total and d.memory_free is not None else None,
        d.memory_total, None, None) for d in devs)


def _backend_name() -> str:
    """The GPU backend to ask for figures ("" where NVML's or none are to be had)."""
    from app.engine import backend

    return (backend.compiled_gpu_backend() or "backend") if backend_gpus() else ""


class MachineSampler:
    """Samples on its own daemon thread; `latest` is the newest MachineSample (None at first)."""

    def __init__(self, interval_s: float = SAMPLE_S):
        import psutil

        self._proc = psutil.Process()
        self._psutil = psutil
        self._nvml = _Nvml.open()
        # Whether the backend has a GPU of its own to ask (only where NVML has none): found
        # once, on the sampler's thread, since asking may start the GPU driver.
        self._backend: str | None = None if not self._nvml.handles else ""
        self.interval_s = interval_s
        self.latest: MachineSample | None = None
        self._stop = threading.Event()
        psutil.cpu_percent(percpu=True)  # the first call only sets the baseline
        self._thread = threading.Thread(target=self._run, name="llamadesk-machine", daemon=True)
        self._thread.start()

    def sample(self) -> MachineSample:
        per = tuple(self._psutil.cpu_percent(percpu=True))
        if self._backend is None:
            self._backend = _backend_name()
        gpus, note, source = self._nvml.read(), self._nvml.note, "NVML"
        if not gpus and self._backend:
            gpus, source = backend_gpus(), self._backend
            note = None if gpus else note
        return MachineSample(sum(per) / len(per) if per else 0.0, per, self._proc.memory_info().rss,
                             gpus, note, source)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.latest = self.sample()
            except Exception:  # noqa: BLE001 - a platform without a counter: keep the last sample
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)


def describe(s: MachineSample | None) -> tuple[str, str]:
    """(CPU and memory line, GPU line) for the gauges."""
    if s is None:
        return "–", "–"
    cores = " ".join(f"{c:.0f}" for c in s.per_core[:16]) + (" …" if len(s.per_core) > 16 else "")
    cpu = f"CPU {s.cpu_pct:.0f}% (cores {cores}) · memory {s.rss / 1e6:,.0f} MB"
    if not s.gpus:
        return cpu, s.gpu_note or "not available"
    parts = []
    for g in s.gpus:
        bits = [g.name]
        if g.util_pct is not None:
            bits.append(f"{g.util_pct:.0f}%")
        if g.mem_used is not None and g.mem_total:
            bits.append(f"{g.mem_used / 2**30:.1f}/{g.mem_total / 2**30:.0f} GiB")
        if g.power_w is not None:
            bits.append(f"{g.power_w:.0f} W")
        if g.temp_c is not None:
            bits.append(f"{g.temp_c:.0f} °C")
        parts.append(" · ".join(bits))
    via = "" if s.gpu_source == "NVML" else f" ({s.gpu_source}: memory only)"
    return cpu, "; ".join(parts) + via
