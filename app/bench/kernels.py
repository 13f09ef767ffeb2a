"""`bench --kernels`: this CPU's llama.cpp builds side by side, the engine's figures beside
llama-bench's, each build in its own processes (a process loads one library).

The builds: pip's as the README installs it, loaded without extra weight buffers (its AMX
kernel is the unfixed one); the AMX-free build with llama.cpp's other repacked kernels (the
CPU side of packaging/build-vulkan.sh, no layer offloaded); and the fixed build with AMX
(packaging/build-llama-tools.sh). A build that is not there is reported as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.bench.servers import ROOT, llama_tools

# (name, what it is): the order of the table's columns.
BUILDS = (("pip", "pip's build, no repacking"), ("repack", "AMX-free build, other repacked kernels"),
          ("amx", "fixed build, AMX"))
FIGURES = (("pp512_tok_s", "pp512 tok/s"), ("tg128_t1_tok_s", "tg128 1 thread tok/s"),
           ("tg128_t2_tok_s", "tg128 2 threads tok/s"), ("batch32x64_tok_s", "batch 32 x 64 tok/s"),
           ("check9_all_logits_ms", "9-row check, all logits ms"),
           ("check9_last_logits_ms", "9-row check, last logits ms"), ("step1_ms", "one-token step ms"),
           ("ttft_2000_s", "TTFT 2,000-token prompt s"))


def _vulkan_build() -> Path | None:
    r = subprocess.run(["bash", str(ROOT / "packaging" / "build-vulkan.sh"), "--print"], capture_output=True,
                       text=True)
    return Path(r.stdout.strip()) if r.returncode == 0 else None


def _library_env(build: str, tools: Path | None) -> tuple[dict[str, str] | None, Path | None, str]:
    """(environment of the engine child, folder of its llama-bench, --repack value), or None
    for the environment when that build is not here."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_CPP_LIB_PATH", "GGML_VK_VISIBLE_DEVICES")}
    if build == "pip":
        return {**env, "LLAMADESK_LLAMA_LIB": "pip"}, tools, "0"
    if build == "repack":
        vk = _vulkan_build()
        return ({**env, "LLAMA_CPP_LIB_PATH": str(vk)} if vk else None), vk, "1"
    return ({**env} if tools else None), tools, "1"


def _engine(model: str, env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-m", "app.bench.kernel_figures", model], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=1800)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the engine child exited with {r.returncode}: {tail}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _llama_bench(folder: Path, model: str, repack: str, env: dict[str, str]) -> dict:
    """llama-bench's pp512 and tg128 at 1 and 2 threads (and llama-batched-bench's 32 x 64 where
    the folder has it), no layer offloaded."""
    run_env = {**env, "LD_LIBRARY_PATH": str(folder)}
    r = subprocess.run([str(folder / "llama-bench"), "-m", model, "-p", "512", "-n", "128", "-t", "1,2",
                        "-r", "3", "-ngl", "0", "--repack", repack, "-o", "json"],
                       capture_output=True, text=True, env=run_env, timeout=1800)
    if r.returncode != 0:
        return {"error": f"llama-bench exited with {r.returncode}"}
    out: dict = {}
    for run in json.loads(r.stdout):
        if run["n_prompt"] == 512 and run["n_threads"] == 2:
            out["pp512_tok_s"] = run["avg_ts"]
        elif run["n_gen"] == 128:
            out[f"tg128_t{run['n_threads']}_tok_s"] = run["avg_ts"]
    batched = folder / "llama-batched-bench"
    if batched.exists():
        b = subprocess.run([str(batched), "-m", model, "-c", "4096", "-b", "512", "-ub", "512", "-npp", "16",
                            "-ntg", "64", "-npl", "32", "-t", "2", "-ngl", "0", "--output-format", "jsonl"],
                           capture_output=True, text=True, env={**run_env, "LLAMA_ARG_REPACK": repack},
                           timeout=1800)
        rows = [json.loads(x) for x in b.stdout.splitlines() if x.startswith("{")]
        if b.returncode == 0 and rows:
            out["batch32x64_tok_s"] = rows[-1]["speed_tg"]
    return out


def run_kernels_bench(model: str) -> dict:
    tools = llama_tools()
    result: dict = {"model": model, "builds": {}}
    for build, what in BUILDS:
        env, folder, repack = _library_env(build, tools)
        if env is None:
            result["builds"][build] = {"what": what, "error": "not built here"}
            continue
        got = {"what": what, "engine": _engine(model, env)}
        if folder is not None and (folder / "llama-bench").exists():
            got["llama_bench"] = _llama_bench(folder, model, repack, env)
        result["builds"][build] = got
    before, after = result["builds"]["pip"].get("engine", {}), result["builds"]["amx"].get("engine", {})
    result["amx_over_pip"] = {k: _ratio(after.get(k), before.get(k), k.endswith(("_ms", "_s")) and
                                        not k.endswith("tok_s")) for k, _ in FIGURES}
    return result


def _ratio(new, old, lower_is_better: bool) -> float | None:
    """How many times faster the new build is (a time's ratio inverted)."""
    if not new or not old:
        return None
    return round(old / new if lower_is_better else new / old, 2)


def table(result: dict) -> str:
    names = [b for b, _ in BUILDS]
    head = ["figure"] + [f"{b} engine" for b in names] + [f"{b} llama-bench" for b in names] + ["amx / pip"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, label in FIGURES:
        cells = [label]
        for source in ("engine", "llama_bench"):
            for b in names:
                v = result["builds"][b].get(source, {}).get(key)
                cells.append("" if v is None else f"{v:.3g}" if v < 10 else f"{v:.0f}")
        r = result["amx_over_pip"].get(key)
        cells.append("" if r is None else f"{r:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    for b, what in BUILDS:
        info = result["builds"][b]
        eng = info.get("engine", {})
        said = f"AMX {eng.get('amx')}; repacked {eng.get('repacked_mib') or 'nothing'}"
        lines.append(f"{b}: {what}; " + (info.get("error") or eng.get("error") or said))
    return "\n".join(lines)
