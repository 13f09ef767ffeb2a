"""The engine on AMX: the fixed llama.cpp build runs its AMX kernels, pip's falls back, never a crash.

Each case runs in a fresh interpreter, because the library is chosen once, before llama_cpp is
first imported. They need llama.cpp's tools built (the README's test command builds them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.engine.library_choice import MARKER, cksum, cpu_has_amx
from tests.remote.servers import _REAL_ENV, llama_tools

ROOT = Path(__file__).resolve().parents[2]

# Loads the model, answers a prompt greedily, and prints what it ran on.
PROBE = """
import json, os, sys
from app.engine import backend
from app.engine.decoder import Decoder
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
model = load_model(sys.argv[1], LoadOptions(n_ctx=512))
dec = Decoder(model)
settings = GenerationSettings(max_tokens=8, temperature=0, ignore_eos=True)  # 8 tokens whatever it says
r = dec.generate(dec.tokenize("The capital of France is"), settings)
print(json.dumps({"lib": str(backend.library_dir()), "env": os.environ.get("LLAMA_CPP_LIB_PATH"),
                  "amx": model.report.amx, "repacked": model.report.repacked,
                  "tokens": r.stats.decode_tokens}))
"""


def _probe(model_path: Path, **env: str) -> dict:
    base = {k: v for k, v in _REAL_ENV.items() if k != "LLAMA_CPP_LIB_PATH"}
    r = subprocess.run([sys.executable, "-c", PROBE, str(model_path)], capture_output=True, text=True,
                       cwd=ROOT, env={**base, **env}, timeout=300)
    assert r.returncode == 0, f"the engine died ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_engine_loads_the_fixed_build_and_runs_amx(model_path):
    tools = llama_tools()
    got = _probe(model_path)
    assert got["tokens"] == 8
    if not cpu_has_amx():
        assert got["env"] is None and got["amx"] == "off: this CPU has no AMX"
        return
    assert (tools / MARKER).is_file(), "build-llama-tools.sh did not mark its build as fixed"
    assert got["env"] == str(tools) and got["lib"] == str(tools)
    assert got["amx"].startswith("on: llama.cpp built here with LlamaDesk's AMX fix")
    # The weights the AMX kernel takes went to its buffer (the tied output matrix alone is ~170 MiB).
    assert got["repacked"].get("AMX", 0) > 100 * 2**20


def test_pip_build_falls_back_with_one_line_reason_and_answers(model_path):
    got = _probe(model_path, LLAMADESK_LLAMA_LIB="pip")
    assert got["env"] is None and got["lib"].endswith(os.path.join("llama_cpp", "lib"))
    assert got["tokens"] == 8
    assert "\n" not in got["amx"]
    if cpu_has_amx():
        assert got["amx"].startswith("off: pip's llama.cpp build has the unfixed AMX kernel")
        assert got["repacked"] == {}  # no extra buffers at all: the unfixed kernel never runs


def test_a_library_the_user_named_is_kept(model_path):
    pip_lib = _probe(model_path, LLAMADESK_LLAMA_LIB="pip")["lib"]
    got = _probe(model_path, LLAMA_CPP_LIB_PATH=pip_lib)
    assert got["lib"] == pip_lib and got["tokens"] == 8
    if cpu_has_amx():
        assert got["amx"].startswith("off: pip's llama.cpp build")


def test_llama_bench_repacks_with_the_fixed_tools(model_path):
    """llama.cpp's own tool, repacking on (the AMX buffer where the CPU has AMX): no SIGILL."""
    tools = llama_tools()
    r = subprocess.run([str(tools / "llama-bench"), "-m", str(model_path), "-p", "32", "-n", "4", "-r", "1",
                        "-t", "2", "--repack", "1", "-o", "json"], capture_output=True, text=True,
                       env={**_REAL_ENV, "LD_LIBRARY_PATH": str(tools)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = json.loads(r.stdout)
    assert {run["n_prompt"] for run in runs} == {32, 0} and all(run["avg_ts"] > 0 for run in runs)


def test_tools_repack_only_where_their_build_is_fixed(tmp_path):
    from app.engine.backend import tool_env

    fixed = llama_tools()
    assert "LLAMA_ARG_REPACK" not in tool_env({"LD_LIBRARY_PATH": str(fixed)})
    unfixed = tool_env({"LD_LIBRARY_PATH": str(tmp_path)})
    assert unfixed.get("LLAMA_ARG_REPACK") == ("0" if cpu_has_amx() else None)


def test_cpu_key_matches_the_packaging_scripts():
    """The engine finds the build under the key build-llama-tools.sh gives it."""
    r = subprocess.run(["bash", "-c", "(grep -m1 '^flags' /proc/cpuinfo || uname -m) | cksum"],
                       capture_output=True, text=True, check=True)
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        line = next((ln for ln in f if ln.startswith("flags")), "")
    assert int(r.stdout.split()[0]) == cksum(line.encode())
