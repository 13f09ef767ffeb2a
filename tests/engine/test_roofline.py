"""Both roofs: MACs a token costs from the GGUF, the kernels' probed MAC rate (cached), the lower
roof as the ceiling, and where one decoded token's time goes."""

from __future__ import annotations

import json
import math

import pytest

from app.engine import compute_peak
from app.engine.gguf import read_header
from app.engine.macs import batch_macs, token_macs
from app.engine.utilization import Limits, kv_bytes, limits_for, weight_bytes


@pytest.fixture(scope="module")
def one_thread_model(model_path):
    from app.engine.loader import LoadOptions, load_model

    m = load_model(model_path, LoadOptions(n_ctx=1024, n_threads=1))
    yield m
    m.close()


def test_macs_per_token_are_the_matmul_weights_and_attention_by_the_files_shapes(model_path):
    import gguf

    h = read_header(model_path)
    shapes = {t.name: [int(d) for d in t.shape] for t in gguf.GGUFReader(str(model_path)).tensors}
    # Second route, by hand from the shapes: every 2-D tensor in a block is a matmul weight
    # (one MAC per element per token); the embedding is a lookup, and as this model has no
    # output.weight it is the output matrix too, multiplied in full for a token's logits.
    assert "output.weight" not in shapes
    layers = sum(math.prod(s) for n, s in shapes.items() if n.startswith("blk.") and len(s) == 2)
    output = math.prod(shapes["token_embd.weight"])
    assert output == 262_144 * 640
    # Attention: Q·K is q's output width (heads x key length) per position attended, P·V heads x
    # value length; Gemma 3 attends to all positions in 3 of its 18 layers, 512 in the rest.
    q_out = shapes["blk.0.attn_q.weight"][1]
    k_len = shapes["blk.0.attn_k_norm.weight"][0]
    v_len = shapes["blk.0.attn_v.weight"][1] // h.metadata["gemma3.attention.head_count_kv"]
    per_position = q_out + q_out // k_len * v_len
    blocks = 1 + max(int(n.split(".")[1]) for n in shapes if n.startswith("blk."))
    for pos in (100, 2000):
        attended = blocks // 6 * pos + (blocks - blocks // 6) * min(pos, 512)
        t = token_macs(h, pos)
        assert (t.layers, t.output, t.attention) == (layers, output, per_position * attended)
        assert t.total == layers + output + per_position * attended
    assert token_macs(h, 100, logits=False).output == 0
    assert batch_macs(h, 4) == 4 * layers + output + sum(token_macs(h, p).attention for p in (1, 2, 3, 4))


def test_the_ceiling_is_the_lower_roof_and_each_utilization_its_own(model_path):
    h = read_header(model_path)
    per_token = weight_bytes(h) + kv_bytes(h, 300)
    macs = token_macs(h, 300).total
    compute_bound = Limits(h, "f16", 1e12, "test", mac_peak=1e6, mac_source="test")
    r = compute_bound.roofs(300, 2e-3)
    assert r.binds == "compute" and r.ceiling_tok_s == r.compute_tok_s == pytest.approx(1e6 / macs)
    assert r.memory_tok_s == pytest.approx(1e12 / per_token) and r.macs_per_token == macs
    assert r.compute_util == pytest.approx(2e-3 * macs / 1e6)
    assert r.memory_util == pytest.approx(2e-3 * per_token / 1e12)
    assert compute_bound.at(300, None)[2] == pytest.approx(1e6 / macs)  # the gauges' ceiling
    assert compute_bound.batched_ceiling([300, 300])[1] == "arithmetic"
    memory_bound = Limits(h, "f16", 1e3, "test", mac_peak=1e15)
    assert memory_bound.roofs(300).binds == "memory"
    assert memory_bound.at(300, None)[2] == pytest.approx(1e3 / per_token)
    unmeasured = Limits(h, "f16", 1e10, "test")  # no compute peak: memory, as before
    r = unmeasured.roofs(300, 10.0)
    assert r.compute_tok_s is None and r.compute_util is None and r.binds == "memory"


def test_the_compute_probe_is_kept_per_machine_and_library_and_reused(one_thread_model, monkeypatch):
    from app import paths
    from app.engine import backend

    monkeypatch.setattr(compute_peak, "PROBE_TOKENS", 64)
    monkeypatch.setattr(compute_peak, "ROUNDS", 1)
    monkeypatch.setattr(compute_peak, "_PEAKS", {})
    assert limits_for(one_thread_model).mac_peak is None  # not measured: not measured at load either
    first, src = compute_peak.compute_peak(one_thread_model)
    assert first > 1e8 and src == "prefill probe: 64 tokens, 1 thread"
    kept = json.loads((paths.cache_dir() / compute_peak.CACHE_NAME).read_text())
    (key,) = kept
    amx = "on" if backend.amx().on else "off"
    assert kept[key] == first and key.endswith(f"|1|{backend.library_dir()}|amx={amx}")

    def no_probe(*_a, **_k):
        raise AssertionError("probed again")
    monkeypatch.setattr(compute_peak, "probe_compute", no_probe)
    monkeypatch.setattr(compute_peak, "_PEAKS", {})  # a new process: the cache's figure
    again, src2 = compute_peak.compute_peak(one_thread_model)
    assert again == first and src2 == "prefill probe: 64 tokens, 1 thread, measured earlier"
    lim = limits_for(one_thread_model)
    assert lim.mac_peak == first and lim.mac_source == src2


def test_a_tokens_profile_splits_the_whole_into_positive_parts(one_thread_model):
    from app.engine.token_profile import profile_token

    p = profile_token(one_thread_model, deep=512, steps=4, rounds=3, other=0)
    parts = p.parts()
    assert p.threads == 1 and p.whole_ms > 0 and p.other_threads_ms is None
    assert parts["output_matrix"] > 0 and parts["attention"] > 0 and parts["layer_matmuls"] > 0
    assert sum(parts.values()) == pytest.approx(p.whole_ms)
    # What is left is small against the rest: noise may tip it a little below zero, never far.
    assert -0.2 * p.whole_ms < parts["overhead"] < p.whole_ms
    assert parts["layer_matmuls"] < p.shallow_ms and parts["output_matrix"] < p.shallow_ms
    d = p.as_dict()
    assert set(d["shares"]) == set(parts) and json.dumps(d)


def test_the_engine_bench_reports_both_roofs_the_binding_one_and_the_profile(model_path, monkeypatch, capsys):
    from app.bench.engine import run_engine_bench
    from app.commands.bench import _print_lines
    from app.engine import token_profile
    from app.engine.loader import LoadOptions

    monkeypatch.setattr(compute_peak, "PROBE_TOKENS", 64)
    monkeypatch.setattr(compute_peak, "ROUNDS", 1)
    monkeypatch.setattr(compute_peak, "_PEAKS", {})  # this small probe's figure stays in this test
    monkeypatch.setattr(token_profile, "DEEP", 64)
    monkeypatch.setattr(token_profile, "STEPS", 2)
    d = run_engine_bench(model_path, LoadOptions(n_threads=1), tokens=8, rounds=1, reuse=False)
    for k in ("memory_roof_tok_s", "compute_roof_tok_s", "memory_utilization", "compute_utilization",
              "binding_roof", "roofline_ceiling_tok_s", "peak_gmac_s", "compute_peak_source",
              "macs_per_token"):
        assert d[k] is not None, k
    assert d["binding_roof"] in ("memory", "compute")
    assert d["roofline_ceiling_tok_s"] == min(d["memory_roof_tok_s"], d["compute_roof_tok_s"])
    assert d["compute_peak_source"].startswith("prefill probe: 64 tokens, 1 thread")
    assert d["compute_utilization"] == pytest.approx(d["engine_decode_tok_s"] / d["compute_roof_tok_s"])
    prof = d["token_profile"]
    assert set(prof["parts_ms"]) == {"output_matrix", "attention", "layer_matmuls", "overhead"}
    json.dumps(d)
    _print_lines(d)
    out = capsys.readouterr().out
    assert "token_profile.parts_ms.output_matrix:" in out and "of roofs (" in out and "binds)" in out
