"""The random-weight model gpu-check.sh decodes on a lent GPU: a real GGUF llama.cpp runs,
whose logits are finite numbers (random bytes as block scales would give NaN or inf)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "packaging" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "small.gguf"
    return out, _load("gpu_check_model").write_model(out, "small")


def test_the_small_model_has_the_shapes_it_says_and_decodes_finite_logits(small_model):
    import llama_cpp

    path, info = small_model
    assert info["params"] > 20_000_000 and info["bytes"] == path.stat().st_size
    llm = llama_cpp.Llama(str(path), n_ctx=256, n_threads=2, verbose=False)
    try:
        assert llm.n_vocab() == 32000 and llm.n_embd() == 512
        tokens = llm.tokenize(b"User: hello there\nAssistant:")
        llm.eval(tokens)
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits = [ptr[i] for i in range(llm.n_vocab())]
        assert all(math.isfinite(x) for x in logits)
        assert max(logits) > min(logits)  # not all one value: the weights are not all zero
        out = llm.create_completion("User: hi\nAssistant:", max_tokens=8, temperature=0)
        assert out["usage"]["completion_tokens"] >= 1
    finally:
        llm.close()


def test_the_1b_size_is_llama_3_2_1b_shaped():
    sizes = _load("gpu_check_model").SIZES
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab = sizes["1b"]
    params = n_vocab * n_embd + n_layer * (2 * n_embd * n_embd + 2 * n_embd * (n_embd // n_head * n_head_kv)
                                           + 3 * n_embd * n_ff)
    assert 1.1e9 < params < 1.4e9


def test_the_summary_puts_each_figure_beside_its_reference(tmp_path):
    import json

    summary = _load("gpu_check_summary")
    bench = {"runs_on": "CUDA (17/17 layers on GPU)", "engine_decode_tok_s": 500.0,
             "engine_prefill_tok_s": 9e3, "engine_ttft_s": 0.01, "raw_decode_tok_s": 510.0,
             "decode_ratio": 0.98}
    (tmp_path / "bench-offload.json").write_text(json.dumps(bench))
    (tmp_path / "bench-cpu.json").write_text(json.dumps({**bench, "runs_on": "CPU (by choice)",
                                                         "engine_decode_tok_s": 50.0}))
    (tmp_path / "llama-bench.json").write_text(json.dumps([
        {"n_prompt": 512, "n_gen": 0, "avg_ts": 20000.0, "backends": "CUDA"},
        {"n_prompt": 0, "n_gen": 128, "avg_ts": 520.0, "backends": "CUDA", "n_gpu_layers": 99}]))
    s = summary.summarize(tmp_path, "cuda", 120, "NVIDIA H200, 9.0", 400)
    assert s["decode_vs_llama_bench"] == pytest.approx(500 / 520)
    assert s["gpu_vs_cpu_decode"] == pytest.approx(10.0)
    assert s["llama_bench_prefill_tok_s"] == 20000.0 and "batch_speedup" not in s
