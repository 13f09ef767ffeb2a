"""GPU offload for real: llama.cpp's Vulkan backend on this machine's Vulkan device.

packaging/build-vulkan.sh builds llama.cpp's libraries with GGML_VULKAN from the sources
of the llama-cpp-python in the venv; llama-cpp-python loads them instead of the CPU
wheel's own when LLAMA_CPP_LIB_PATH names their folder. These tests start LlamaDesk in
child processes that way. On a machine without a GPU the device is Mesa's lavapipe
(llvmpipe: Vulkan on the CPU), which ggml-vulkan skips as a CPU-type device unless
GGML_VK_VISIBLE_DEVICES names it: the tests set it, the user never has to. Every buffer,
kernel and copy goes through the Vulkan driver; only the speed says it is a CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.stats import ReplyStats

ROOT = Path(__file__).resolve().parents[2]
# The build's cache is in the real home; the tests run with a private one (tests/conftest.py).
_REAL_ENV = dict(os.environ)


def _vulkan_build() -> Path | None:
    if _REAL_ENV.get("LLAMADESK_VULKAN_LIBS"):
        return Path(_REAL_ENV["LLAMADESK_VULKAN_LIBS"])
    r = subprocess.run(["bash", str(ROOT / "packaging" / "build-vulkan.sh"), "--print"],
                       capture_output=True, text=True, env=_REAL_ENV)
    return Path(r.stdout.strip()) if r.returncode == 0 else None


VULKAN = _vulkan_build()
pytestmark = pytest.mark.skipif(VULKAN is None, reason="needs the Vulkan build of llama.cpp: run "
                                                       "packaging/build-vulkan.sh (.ci/run does)")
LAYERS = 19  # Gemma 3 270M: 18 blocks and the output layer, as llama.cpp counts them
DEVICE = "llvmpipe"  # lavapipe's device name; set LLAMADESK_VULKAN_DEVICE for a real GPU
DEVICE = _REAL_ENV.get("LLAMADESK_VULKAN_DEVICE", DEVICE)


def vk_env(**extra: str | None) -> dict[str, str]:
    """This environment with the Vulkan build loaded and device 0 visible; a None drops a variable."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    # LLAMA_CPP_LIB_PATH alone, as a user gives it: the libraries' RUNPATH is their folder.
    env.update({"LLAMA_CPP_LIB_PATH": str(VULKAN), "GGML_VK_VISIBLE_DEVICES": "0",
                # lavapipe compiles each of ggml's shaders to CPU code on first use (~70 s of a
                # first reply here); Mesa's shader cache beside the build keeps that to one run.
                "MESA_SHADER_CACHE_DIR": str(VULKAN.parent / "mesa-shader-cache")})
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _ask(model_path, layers: str, env: dict[str, str], tokens: int = 4) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", "ask", "Say hi.", "--json", "--no-save", "--max-tokens", str(tokens),
         "--gpu-layers", layers, "--threads", "2", "--ctx", "256", "--temperature", "0",
         "--model", str(model_path)],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("llamadesk: ")]


REPORT = r"""
import json, sys
from app.engine import backend
from app.engine.loader import LoadOptions, load_model
from app.ui.settings.hardware import hardware_rows

m = load_model(sys.argv[1], LoadOptions(n_ctx=256, n_gpu_layers=int(sys.argv[2]), n_threads=2))
try:
    kv = [ln for _lvl, ln in backend.TAP.since(0) if "KV buffer size" in ln]
    print(json.dumps({"report": m.report.to_json(), "rows": hardware_rows(m.report), "kv": kv,
                      "libdir": str(backend.library_dir()), "compiled": backend.compiled_gpu_backend()}))
finally:
    m.close()
"""


def _report(model_path, layers: int, env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", REPORT, str(model_path), str(layers)], capture_output=True,
                       text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def full(model_path) -> dict:
    return _report(model_path, -1, vk_env())


def test_the_load_report_puts_every_layer_on_the_vulkan_device(full):
    r = full["report"]
    assert full["libdir"] == str(VULKAN) and full["compiled"] == "Vulkan"
    assert r["backend"] == "Vulkan" and r["gpu_offload_supported"] is True
    assert (r["layers_offloaded"], r["layers_total"]) == (LAYERS, LAYERS)
    assert r["fallback"] is None
    assert r["runs_on"] == f"Vulkan ({LAYERS}/{LAYERS} layers on GPU)"
    gpus = [d for d in r["devices"] if d["kind"] == "GPU"]
    assert len(gpus) == 1 and gpus[0]["name"] == "Vulkan0" and DEVICE in gpus[0]["description"]
    assert gpus[0]["memory_total"] > 2**28 and 0 < gpus[0]["memory_free"] <= gpus[0]["memory_total"]
    assert r["gpu_device"] == gpus[0]["description"]


def test_the_kv_cache_is_on_the_device(full):
    assert any("Vulkan0 KV buffer size" in ln for ln in full["kv"]), full["kv"]


def test_the_hardware_panel_names_the_device_its_memory_and_the_layers(full):
    rows = full["rows"]
    assert [t for lab, t in rows if lab == "GPU offload"] == ["Vulkan"]
    dev = [t for lab, t in rows if lab == "Device" and t.startswith("GPU: ")]
    assert len(dev) == 1 and DEVICE in dev[0] and "(Vulkan0)" in dev[0] and "GiB free of" in dev[0], rows
    assert [t for lab, t in rows if lab == "Layers on GPU"] == [f"{LAYERS} of {LAYERS}"]


def test_ask_json_runs_every_layer_on_the_device_and_the_reply_stats_say_so(model_path):
    out = _ask(model_path, "-1", vk_env())
    assert out.returncode == 0, out.stderr[-3000:]
    reply = json.loads(out.stdout)
    assert reply["runs_on"] == f"Vulkan ({LAYERS}/{LAYERS} layers on GPU)"
    st = reply["stats"]
    assert st["decode_tokens"] >= 1
    assert (st["gpu_layers"], st["layers_total"]) == (LAYERS, LAYERS) and DEVICE in st["gpu_device"]
    footer = ReplyStats.from_json(st).summary()  # the window's footer and ask's stderr line
    assert f"{LAYERS}/{LAYERS} layers on {st['gpu_device']}" in footer
    assert _notes(out.stderr) == [f"llamadesk: runs on {reply['runs_on']}"]


def test_a_partial_offload_is_reported_as_asked(model_path):
    out = _ask(model_path, "7", vk_env(), tokens=2)
    assert out.returncode == 0, out.stderr[-3000:]
    reply = json.loads(out.stdout)
    assert reply["runs_on"] == f"Vulkan (7/{LAYERS} layers on GPU)"
    assert (reply["stats"]["gpu_layers"], reply["stats"]["layers_total"]) == (7, LAYERS)


def test_zero_gpu_layers_is_the_cpu_by_choice(model_path):
    out = _ask(model_path, "0", vk_env(), tokens=2)
    assert out.returncode == 0, out.stderr[-3000:]
    reply = json.loads(out.stdout)
    assert reply["runs_on"] == "CPU (by choice: GPU layers set to 0)"
    assert reply["stats"]["gpu_layers"] == 0 and reply["stats"]["gpu_device"] is None
    assert "usable GPU" not in out.stderr


@pytest.mark.parametrize("broken", [
    {"VK_ICD_FILENAMES": "/nonexistent/vulkan-icd.json", "VK_DRIVER_FILES": "/nonexistent/vulkan-icd.json"},
    {"GGML_VK_VISIBLE_DEVICES": "7"},  # no such device
    {"GGML_VK_VISIBLE_DEVICES": None},  # ggml-vulkan skips a CPU-type device it was not given
], ids=["missing-driver", "no-such-device", "cpu-type-device-not-named"])
def test_a_missing_or_broken_driver_falls_back_to_the_cpu_in_one_line(model_path, broken):
    if broken.get("GGML_VK_VISIBLE_DEVICES", "") is None and DEVICE != "llvmpipe":
        pytest.skip("a real GPU is used without GGML_VK_VISIBLE_DEVICES")
    out = _ask(model_path, "-1", vk_env(**broken), tokens=2)
    assert out.returncode == 0, out.stderr[-3000:]
    reply = json.loads(out.stdout)
    assert reply["runs_on"] == "CPU (Vulkan build, no usable GPU found)"
    assert reply["stats"]["decode_tokens"] >= 1 and reply["stats"]["gpu_layers"] == 0
    notes = _notes(out.stderr)
    assert len(notes) == 1, out.stderr
    assert notes[0].startswith("llamadesk: this llama.cpp build has Vulkan, but no usable GPU was found")
    assert notes[0].endswith("running on the CPU")
    assert "Traceback" not in out.stderr


def test_bench_json_names_the_device_its_memory_and_the_layers(model_path):
    r = subprocess.run([sys.executable, "-m", "app", "bench", "--json", "--no-reuse", "--tokens", "8",
                        "--rounds", "1", "--gpu-layers", "-1", "--threads", "2", "--model", str(model_path)],
                       capture_output=True, text=True, timeout=600, env=vk_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    b = json.loads(r.stdout)
    assert b["runs_on"] == f"Vulkan ({LAYERS}/{LAYERS} layers on GPU)" and b["backend"] == "Vulkan"
    assert (b["layers_offloaded"], b["layers_total"]) == (LAYERS, LAYERS)
    gpus = [d for d in b["devices"] if d["kind"] == "GPU"]
    assert len(gpus) == 1 and DEVICE in gpus[0]["description"] and gpus[0]["memory_total"] > 2**28
    assert b["engine_decode_tok_s"] > 0


SAMPLER = r"""
import json, time
from app.engine.machine import MachineSampler, describe

m = MachineSampler(0.2)
try:
    time.sleep(0.7)
    s = m.latest
finally:
    m.close()
print(json.dumps({"gpus": [g.__dict__ for g in s.gpus], "source": s.gpu_source, "note": s.gpu_note,
                  "line": describe(s)[1]}))
"""


def test_the_gauges_gpu_row_comes_from_the_backend_where_nvml_sees_no_gpu():
    """No NVIDIA driver here: NVML has nothing, and the gauges' GPU row names the Vulkan
    device and its memory from ggml instead of saying "no NVIDIA GPU"."""
    r = subprocess.run([sys.executable, "-c", SAMPLER], capture_output=True, text=True, timeout=120,
                       env=vk_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["source"] == "Vulkan" and s["note"] is None and len(s["gpus"]) == 1
    g = s["gpus"][0]
    assert DEVICE in g["name"] and g["mem_total"] > 2**28 and 0 <= g["mem_used"] <= g["mem_total"]
    assert g["util_pct"] is None and g["power_w"] is None  # ggml cannot tell these: not shown as 0
    assert s["line"].startswith(g["name"]) and s["line"].endswith("GiB (Vulkan: memory only)"), s["line"]


def _gpu_report_tests(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/packaging/test_gpu_report.py"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def test_the_gpu_report_tests_pass_on_the_vulkan_device():
    """tests/packaging/test_gpu_report.py on this build, the device visible: its CPU-build
    tests skip (this is not one), the rest pass."""
    r = _gpu_report_tests(vk_env())
    assert r.returncode == 0, r.stdout[-4000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
    skipped = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    ok = ("this llama.cpp build has a GPU backend", "finds its GPU")
    assert all(any(why in ln for why in ok) for ln in skipped), skipped


def test_the_no_usable_gpu_tests_run_on_a_vulkan_build_with_no_driver():
    """The tests that skip on the CPU wheel "for want of a GPU build with no usable GPU"
    (a CUDA wheel here): the Vulkan build with its driver missing is such a build."""
    r = _gpu_report_tests(vk_env(VK_ICD_FILENAMES="/nonexistent/vulkan-icd.json",
                                 VK_DRIVER_FILES="/nonexistent/vulkan-icd.json"))
    assert r.returncode == 0, r.stdout[-4000:]
    skipped = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert not any("no usable GPU" in ln or "finds its GPU" in ln for ln in skipped), skipped


def test_the_load_report_says_what_the_load_put_on_the_device_by_part(full):
    """llama.cpp's own account of the device's buffers: the weights but the token embedding,
    the KV cache and the compute buffer, each on Vulkan0; host buffers are not counted."""
    bufs = full["report"]["device_buffers"]
    assert set(bufs) == {"Vulkan0"}, bufs
    parts = bufs["Vulkan0"]
    assert {"model", "KV", "compute"} <= set(parts) and all(v > 0 for v in parts.values()), parts
    assert parts["model"] < Path(full["report"]["model_path"]).stat().st_size  # the embedding stays


FIT = r"""
import json, sys
from app.engine import backend
from app.engine.gguf import read_header
from app.hub.fit import judge, predict
from app.hub.resources import free_ram, free_vram, gpu_layers_used

layers = gpu_layers_used(-1)
vram = free_vram()
p = judge(predict(read_header(sys.argv[1]), 4096, gpu_layers=layers), free_ram(), vram)
gpus = [d.memory_free for d in backend.devices() if d.kind == "GPU"]
print(json.dumps({"layers": layers, "vram": vram, "device_free": gpus, "gpu": p.gpu, "label": p.label,
                  "summary": p.summary()}))
"""


def test_the_fit_check_counts_the_vulkan_devices_memory_where_nvml_sees_no_gpu(model_path):
    """The Models window's labels and `models search` judge a model against the device its
    layers will go to: with no NVIDIA GPU, the backend's own device and its free memory."""
    r = subprocess.run([sys.executable, "-c", FIT, str(model_path)], capture_output=True, text=True,
                       timeout=120, env=vk_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    f = json.loads(r.stdout.splitlines()[-1])
    assert f["layers"] == -1 and len(f["device_free"]) == 1
    assert f["vram"] == f["device_free"][0] > 2**28
    assert f["gpu"] > 0 and f["label"] in ("fits", "tight", "won't fit")
    assert "of GPU memory (" in f["summary"] and "free)" in f["summary"], f["summary"]


def test_the_fit_check_without_a_usable_device_counts_no_gpu_memory(model_path):
    r = subprocess.run([sys.executable, "-c", FIT, str(model_path)], capture_output=True, text=True,
                       timeout=120, env=vk_env(GGML_VK_VISIBLE_DEVICES=None), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    f = json.loads(r.stdout.splitlines()[-1])
    assert f["layers"] == 0 and f["vram"] is None and f["gpu"] == 0 and "GPU memory" not in f["summary"]


BENCH_FIT = r"""
import json, sys
from pathlib import Path
from app.bench.fit import fit_device
print(json.dumps(fit_device(Path(sys.argv[1]), (512, 4096))))
"""


def test_bench_fit_puts_the_predicted_device_memory_beside_what_llama_cpp_allocated(model_path):
    """`bench --fit`'s GPU half, every layer on the device at two context lengths: the
    prediction from the header alone within 10% of the device buffers llama.cpp made."""
    r = subprocess.run([sys.executable, "-c", BENCH_FIT, str(model_path)], capture_output=True, text=True,
                       timeout=600, env=vk_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    f = json.loads(r.stdout.splitlines()[-1])
    assert DEVICE in f["fit_device_name"] and len(f["fit_device"]) == 2
    small, large = f["fit_device"]
    assert small["layers_offloaded"] == LAYERS
    assert large["measured_device_bytes"] > small["measured_device_bytes"]  # the KV cache grows
    assert f["fit_device_within_10pct"], f
