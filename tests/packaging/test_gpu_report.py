"""Where llama.cpp runs, as the settings show it, on the build these tests run on.

CI and most developers have CPU-only builds, so the GPU path must be proven to
report "no offload" rather than crash or claim layers it never placed. The
GPU-side rendering is checked with a report shaped like a CUDA load's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.engine import backend
from app.engine.loader import LoadOptions, LoadReport, load_model
from app.ui.settings.hardware import NO_OFFLOAD, HardwarePanel, describe_device, hardware_rows

CPU_ONLY = backend.compiled_gpu_backend() is None and not backend.gpu_offload_supported()
cpu_build = pytest.mark.skipif(not CPU_ONLY,
                               reason="this llama.cpp build has a GPU backend (see the GPU-build tests)")


@pytest.fixture(scope="module")
def all_layers_report(model_path) -> LoadReport:
    """A real load asking for every layer on the GPU (the default, -1)."""
    m = load_model(model_path, LoadOptions(n_ctx=256, n_gpu_layers=-1, n_threads=1))
    try:
        return m.report
    finally:
        m.close()


def _row(rows, label):
    return [text for lab, text in rows if lab == label]


@cpu_build
def test_a_cpu_build_says_it_cannot_offload():
    assert backend.compiled_backend() == "CPU"
    rows = hardware_rows(None)
    assert _row(rows, "GPU offload") == [NO_OFFLOAD]
    assert _row(rows, "Layers on GPU") == ["no model loaded"]


def test_devices_list_the_cpu_with_its_memory():
    devs = backend.devices()
    cpus = [d for d in devs if d.kind == "CPU"]
    assert cpus, devs
    assert cpus[0].memory_total and cpus[0].memory_total > 2**28
    assert cpus[0].memory_free is None or cpus[0].memory_free <= cpus[0].memory_total
    text = describe_device(vars(cpus[0]))
    assert text.startswith("CPU: ") and "GiB free of" in text


@cpu_build
def test_all_gpu_layers_on_a_cpu_build_runs_on_cpu_and_says_so(all_layers_report):
    r = all_layers_report
    assert r.n_gpu_layers_requested == -1
    assert r.layers_offloaded == 0
    assert r.fallback is None  # nothing failed: there was no GPU to try
    assert r.runs_on == "CPU (this llama.cpp build has no GPU offload)"
    assert r.layers_total == 18  # Gemma 3 270M's block count, from the GGUF
    assert any(d["kind"] == "CPU" for d in r.devices)
    rows = hardware_rows(r)
    assert _row(rows, "GPU offload") == [NO_OFFLOAD]
    assert _row(rows, "Layers on GPU") == ["0 of 18 (CPU build)"]
    assert _row(rows, "Model runs on") == [r.runs_on]
    json.dumps(r.to_json())  # what the CLI prints must serialize


@cpu_build
def test_cli_ask_with_all_gpu_layers_answers_on_a_cpu_build(model_path, isolated_dirs):
    out = subprocess.run(
        [sys.executable, "-m", "app", "ask", "hi", "--json", "--no-save", "--max-tokens", "4",
         "--gpu-layers", "-1", "--threads", "1", "--ctx", "256", "--seed", "1", "--model", str(model_path)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["stats"]["decode_tokens"] >= 1
    assert "fall" not in out.stderr.lower()  # no fallback note: nothing failed


def _cuda_report(**kw) -> LoadReport:
    base = dict(model_path="/m.gguf", backend="CUDA", gpu_offload_supported=True, n_gpu_layers_requested=-1,
                layers_offloaded=19, layers_total=19, fallback=None, load_s=0.5, n_ctx=4096, n_threads=2,
                devices=[{"name": "CUDA0", "description": "NVIDIA H200", "kind": "GPU",
                          "memory_free": 140 * 2**30, "memory_total": 143 * 2**30},
                         {"name": "CPU", "description": "AMD EPYC", "kind": "CPU",
                          "memory_free": None, "memory_total": None}])
    base.update(kw)
    return LoadReport(**base)


def test_a_gpu_load_shows_backend_device_memory_and_layers():
    rows = hardware_rows(_cuda_report())
    assert _row(rows, "GPU offload") == ["CUDA"]
    assert _row(rows, "Device") == ["GPU: NVIDIA H200 (CUDA0), 140.0 GiB free of 143.0 GiB",
                                    "CPU: AMD EPYC"]
    assert _row(rows, "Layers on GPU") == ["19 of 19"]
    assert _row(rows, "Model runs on") == ["CUDA (19/19 layers on GPU)"]


def test_a_gpu_fallback_and_zero_layers_are_explained():
    why = "GPU load failed (out of memory); running on CPU instead"
    fell = _cuda_report(layers_offloaded=0, fallback=why)
    assert _row(hardware_rows(fell), "Fallback") == [fell.fallback]
    assert _row(hardware_rows(fell), "Model runs on") == ["CPU"]
    off = _cuda_report(layers_offloaded=0, n_gpu_layers_requested=0)
    assert _row(hardware_rows(off), "Layers on GPU") == ["0 (GPU layers set to 0 in these settings)"]


def test_settings_dialog_shows_the_loaded_models_hardware(qtbot, all_layers_report):
    from PySide6.QtWidgets import QLabel

    from app.config import AppConfig
    from app.ui.settings.dialog import SettingsDialog

    dlg = SettingsDialog(AppConfig(), report=all_layers_report)
    qtbot.addWidget(dlg)
    assert isinstance(dlg.hardware, HardwarePanel)
    texts = [w.text() for w in dlg.hardware.findChildren(QLabel)]
    assert all_layers_report.runs_on in texts
    assert any(t.startswith("CPU: ") for t in texts)
    # Read-only: nothing in the section can be edited, and OK still returns only the config.
    assert not dlg.hardware.findChildren(type(dlg.n_ctx))


def test_settings_opened_from_the_window_get_its_load_report(qtbot, model_path, monkeypatch):
    from app.config import AppConfig
    from app.ui.settings.dialog import SettingsDialog
    from app.ui.window import MainWindow

    opened: list[SettingsDialog] = []
    monkeypatch.setattr(SettingsDialog, "exec", lambda self: opened.append(self) or 0)
    win = MainWindow(model=str(model_path), config=AppConfig(n_ctx=256, n_threads=1), persist=False)
    qtbot.addWidget(win)
    try:
        win.open_settings()  # the load's result cannot have arrived: no events ran yet
        assert _row(opened[-1].hardware.rows, "Layers on GPU") == ["no model loaded"]
        with qtbot.waitSignal(win.model_loaded, timeout=30_000):
            pass
        win.open_settings()
        assert _row(opened[-1].hardware.rows, "Model runs on") == [win.load_report.runs_on]
    finally:
        win.close()
    assert win.bridge.engine_thread.isFinished()


def test_a_gpu_build_with_no_usable_gpu_is_not_called_a_cpu_build():
    """What a CUDA wheel says on a machine without a GPU (run for real below, on such a wheel)."""
    why = "this llama.cpp build has CUDA, but no usable GPU was found; running on the CPU"
    none = _cuda_report(gpu_offload_supported=False, layers_offloaded=0, fallback=why,
                        devices=[{"name": "CPU", "description": "AMD EPYC", "kind": "CPU",
                                  "memory_free": None, "memory_total": None}])
    assert none.runs_on == "CPU (CUDA build, no usable GPU found)"
    rows = hardware_rows(none)
    assert _row(rows, "GPU offload") == ["none: CUDA is compiled in, but no usable GPU was found"]
    assert _row(rows, "Device") == ["CPU: AMD EPYC"]  # zero GPUs
    assert _row(rows, "Layers on GPU") == ["0 of 19 (no usable GPU)"]
    assert _row(rows, "Fallback") == [why]
    chosen = _cuda_report(gpu_offload_supported=False, layers_offloaded=0, n_gpu_layers_requested=0)
    assert chosen.runs_on == "CPU (by choice: GPU layers set to 0)" and chosen.fallback is None


def test_the_compiled_gpu_backend_is_read_from_the_libraries_shipped(tmp_path):
    (tmp_path / "libllama.so").write_bytes(b"")
    (tmp_path / "libggml-cpu.so").write_bytes(b"")
    assert backend.compiled_gpu_backend(tmp_path) in (None, *backend.GPU_LIBRARIES.values())
    (tmp_path / "libggml-cuda.so").write_bytes(b"")
    assert backend.compiled_gpu_backend(tmp_path) == "CUDA"


@cpu_build
def test_this_cpu_build_ships_no_gpu_backend():
    assert backend.compiled_gpu_backend() is None and backend.compiled_backend() == "CPU"


no_device_build = pytest.mark.skipif(
    backend.compiled_gpu_backend() is None or backend.gpu_offload_supported(),
    reason="needs a llama.cpp build with a GPU backend on a machine without a usable GPU "
           "(tests/gpu runs these on packaging/build-vulkan.sh's build with no driver); "
           "this build is CPU-only or finds its GPU")


def _ask(model_path, layers: str):
    return subprocess.run(
        [sys.executable, "-m", "app", "ask", "hi", "--json", "--no-save", "--max-tokens", "2",
         "--gpu-layers", layers, "--threads", "1", "--ctx", "256", "--model", str(model_path)],
        capture_output=True, text=True, timeout=120)


@no_device_build
def test_no_usable_gpu_is_said_in_one_line_and_gpu_layers_0_is_a_choice(model_path, isolated_dirs):
    gpu = backend.compiled_gpu_backend()
    out = _ask(model_path, "-1")
    assert out.returncode == 0, out.stderr
    notes = [line for line in out.stderr.splitlines() if "usable GPU" in line]
    said = f"this llama.cpp build has {gpu}, but no usable GPU was found"
    assert len(notes) == 1 and notes[0].startswith(f"llamadesk: {said}")
    assert json.loads(out.stdout)["runs_on"] == f"CPU ({gpu} build, no usable GPU found)"
    chosen = _ask(model_path, "0")
    assert chosen.returncode == 0, chosen.stderr
    assert "usable GPU" not in chosen.stderr
    assert "llamadesk: runs on CPU (by choice: GPU layers set to 0)" in chosen.stderr.splitlines()


@no_device_build
def test_the_window_says_no_usable_gpu_in_its_model_bar(qtbot, model_path):
    from app.config import AppConfig
    from app.ui.window import MainWindow

    win = MainWindow(model=str(model_path), config=AppConfig(n_ctx=256, n_threads=1), persist=False)
    qtbot.addWidget(win)
    win.show()
    try:
        with qtbot.waitSignal(win.model_loaded, timeout=60_000):
            pass
        # The bar names where it runs and flags the fallback; the why is in its tooltip.
        assert "GPU fallback" in win.model_bar.status.text()
        assert "build, no usable GPU found" in win.model_bar.status.toolTip()
        assert win.bar.isVisible() and win.bar.level == "warning" and "no usable GPU" in win.bar.text()
        rows = win.load_report and hardware_rows(win.load_report)
        assert _row(rows, "GPU offload") == [f"none: {backend.compiled_gpu_backend()} is compiled in, "
                                             "but no usable GPU was found"]
    finally:
        win.close()
