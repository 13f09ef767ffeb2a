"""The machine sampler: psutil's CPU and memory figures, and NVML's absence said, not hidden."""

from __future__ import annotations

import time

from app.engine.machine import GpuSample, MachineSample, MachineSampler, describe


def test_samples_arrive_off_the_callers_thread_at_two_hertz():
    m = MachineSampler(0.2)
    try:
        time.sleep(0.8)
        s = m.latest
    finally:
        m.close()
    assert s is not None and len(s.per_core) >= 1 and 0 <= s.cpu_pct <= 100 and s.rss > 10e6
    assert s.gpus == () and s.gpu_note == "no NVIDIA GPU"


def test_gpu_figures_read_as_a_user_would():
    s = MachineSample(50.0, (40.0, 60.0), 300_000_000,
                      (GpuSample("NVIDIA H200", 97.0, 30 * 2**30, 141 * 2**30, 612.0, 71.0),))
    cpu, gpu = describe(s)
    assert cpu == "CPU 50% (cores 40 60) · memory 300 MB"
    assert gpu == "NVIDIA H200 · 97% · 30.0/141 GiB · 612 W · 71 °C"
    assert describe(None) == ("–", "–")
