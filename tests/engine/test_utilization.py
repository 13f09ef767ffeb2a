"""Bytes a decode step reads, from the GGUF tensor table, and the machine's peak read rate."""

from __future__ import annotations

from app.engine.gguf import GGUFHeader, read_header
from app.engine.utilization import kv_bytes, peak_bandwidth, probe_bandwidth, token_bytes, weight_bytes


def test_weight_bytes_match_the_files_tensor_data(model_path):
    h = read_header(model_path)
    w = weight_bytes(h)
    # Second route: the file is its header (a few MB of vocabulary) and its tensor data, each
    # tensor padded to 32 bytes at most; a tied output matrix means every weight is read.
    assert "output.weight" not in h.tensors
    header_and_padding = model_path.stat().st_size - w
    assert 0 < header_and_padding < 8 << 20, header_and_padding
    assert w == sum(b for _, b in h.tensors.values())


def test_a_separate_output_matrix_leaves_the_embedding_a_row_per_token():
    h = GGUFHeader(path=None, version=3, size=0, metadata={"general.architecture": "llama",
                                                             "llama.vocab_size": 1000})
    h.tensors = {"token_embd.weight": (1000 * 64, 64_000), "output.weight": (1000 * 64, 64_000),
                 "blk.0.attn_q.weight": (64 * 64, 4096)}
    assert weight_bytes(h) == 64 + 64_000 + 4096


def test_kv_grows_with_position_and_a_sliding_window_caps_most_layers(model_path):
    h = read_header(model_path)  # Gemma 3: a 512-token window on five layers in six
    assert kv_bytes(h, 100) == 2 * kv_bytes(h, 50)
    assert kv_bytes(h, 4000) < 2 * kv_bytes(h, 2000)  # the windowed layers stopped growing
    tb = token_bytes(h, 300)
    assert tb.total == tb.weights + tb.kv and tb.kv < tb.weights / 10


def test_the_probe_is_positive_and_steady_and_kept_per_machine():
    a, b = probe_bandwidth(1, size=1 << 27), probe_bandwidth(1, size=1 << 27)
    assert a > 0.5e9 and b > 0.5e9 and 0.5 < a / b < 2
    first, src = peak_bandwidth(1)
    again, src2 = peak_bandwidth(1)
    assert again == first and "measured earlier" in src2 and "measured earlier" not in src


def test_measured_again_the_peak_keeps_the_higher_figure(monkeypatch):
    """A probe on a busy machine reads low, never high: a later, lower figure does not replace
    the kept one, a higher one does."""
    from app.engine import utilization

    for probed, kept in ((10e9, 10e9), (4e9, 10e9), (12e9, 12e9)):
        monkeypatch.setattr(utilization, "probe_bandwidth", lambda threads, v=probed: v)
        assert peak_bandwidth(3, remeasure=True)[0] == kept
        assert peak_bandwidth(3) == (kept, "probe (3 threads, measured earlier)")


def test_bench_reports_utilization_and_the_ceiling(model_path):
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "app", "bench", "--json", "--tokens", "16", "--rounds", "1",
                        "--model", str(model_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["bytes_per_token"] > 200e6 and d["peak_read_gbs"] > 0 and d["peak_source"].startswith("probe")
    assert 0 < d["decode_bw_utilization"] < 1.5
    assert abs(d["decode_ceiling_tok_s"] * d["decode_bw_utilization"] - d["engine_decode_tok_s"]) < 1e-6 * \
        d["engine_decode_tok_s"] + 1e-9
    # Which kernels the figures are from: AMX on (its buffer holding weights) or off, and why.
    assert d["amx"].startswith(("on: ", "off: ")) and "\n" not in d["amx"]
    assert (d["repacked_mib"].get("AMX", 0) > 0) == d["amx"].startswith("on: ")


def test_without_nvml_there_is_no_gpu_peak_and_the_cpu_figure_stands(model_path):
    from app.engine.loader import LoadOptions, load_model
    from app.engine.utilization import gpu_peak, limits_for

    assert gpu_peak() is None  # this machine has no NVIDIA driver
    m = load_model(model_path, LoadOptions(n_ctx=512, n_threads=1))
    try:
        lim = limits_for(m)
    finally:
        m.close()
    assert lim is not None and lim.source.startswith("probe (1 threads")


def test_prefill_arithmetic_counts_the_weights_a_prompt_token_multiplies_through(model_path):
    import llama_cpp

    from app.engine.loader import LoadOptions, load_model
    from app.engine.utilization import matmul_params

    h = read_header(model_path)
    # Second route: llama.cpp's loader counts every tensor's elements, the embedding table
    # (n_vocab x n_embd, token_embd.weight) among them. (gguf-py's GGUFReader says the same, but
    # it parses all 262k vocabulary strings as arrays first: 17 s here, for one number.)
    m = load_model(model_path, LoadOptions(n_ctx=256, n_threads=1))
    try:
        model = m.llm.model
        embd = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)) * \
            llama_cpp.llama_model_n_embd(model)
        total = llama_cpp.llama_model_n_params(model)
    finally:
        m.close()
    assert matmul_params(h) == total - embd
    assert 0 < matmul_params(h) < embd * 2  # Gemma 3 270M: mostly embedding


def test_the_batched_ceiling_rises_with_sequences_until_arithmetic_binds(model_path):
    from app.engine.utilization import Limits

    lim = Limits(read_header(model_path), "f16", peak=40e9, source="test")
    one, bound = lim.batched_ceiling([100])
    assert bound == "bandwidth" and abs(one - lim.at(100, None)[2]) < 1e-6 * one  # as the chat shows it
    eight, _ = lim.batched_ceiling([100] * 8)
    assert 7 * one < eight < 8 * one  # weights read once for all; each sequence adds its KV
    long_ctx, _ = lim.batched_ceiling([3000] * 8)
    assert long_ctx < eight
    flop_s = 2 * lim.decode_params * 300  # an arithmetic rate that allows 300 decoded tok/s
    capped, bound = lim.batched_ceiling([100] * 64, flop_s)
    assert bound == "arithmetic" and abs(capped - 300) < 1e-6
    assert lim.batched_ceiling([100], flop_s) == (one, "bandwidth")  # one sequence: memory binds first
