"""`models search` and the fit: against the local Hub, and the prediction against llama.cpp's own
numbers for the bundled model (its KV buffers) and against a real load (bench --fit)."""

from __future__ import annotations

import json
import os

import pytest

from app.engine.gguf import HeaderNeedsMore, header_from_prefix, read_header
from app.hub.fit import Prediction, judge, kv_cache_bytes, predict
from tests.hub.conftest import GATED, GEMMA, TINY, cli
from tests.remote.servers import llama_tools

MiB = 1 << 20


def test_search_lists_each_gguf_with_quant_size_and_fit_reading_one_header(hub, model_path):
    r = cli("models", "search", "gemma", "--json")
    assert r.returncode == 0, r.stderr
    [repo] = json.loads(r.stdout)
    assert repo["repo"] == GEMMA and repo["downloads"] == 900 and not repo["gated"]
    files = {f["quant"]: f for f in repo["files"]}
    assert sorted(files) == ["Q4_K_M", "Q8_0"]  # README.md is no model
    for q, name in (("Q4_K_M", "gemma-3-270m-Q4_K_M.gguf"), ("Q8_0", "gemma-3-270m-Q8_0.gguf")):
        assert files[q]["size"] == hub.repos[GEMMA].file(name).size
        assert files[q]["fit"] == "fits" and files[q]["needs"] > files[q]["size"]
    q4, q8 = files["Q4_K_M"], files["Q8_0"]
    # One header, each file's own weights (and, where the engine runs AMX, their repacked copies).
    from app.engine.backend import amx
    from app.engine.gguf import read_header
    from app.hub.fit import amx_copies

    h = read_header(model_path)
    scale = 1 + (amx_copies(h) / h.size if amx().on else 0)
    assert abs((q8["needs"] - q4["needs"]) - (q8["size"] - q4["size"]) * scale) <= 2
    smallest = hub.repos[GEMMA].file("gemma-3-270m-Q4_K_M.gguf").sha256
    cdn = hub.served("/cdn/")
    assert cdn and all(smallest in s.path and s.status == 206 for s in cdn)
    assert sum(s.sent for s in cdn) <= 8 * MiB  # the header (a 262k-token vocabulary: ~6 MB), grown 1-2-4 MiB


def test_search_table_hides_projectors_and_says_gated(hub):
    r = cli("models", "search", "GGUF", "--ctx", "2048")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.index(GEMMA) < out.index(TINY)  # by downloads
    assert "tiny-Q2_K.gguf" in out and "tiny-Q4_K_M.gguf" in out and "mmproj" not in out
    gated = out[out.index(GATED):].splitlines()
    assert "gated: needs HF_TOKEN" in gated[0] and gated[1].split()[:3] == ["Q4_K_M", "1.5", "MB"]
    assert gated[1].split()[3] == "?"  # no header read without access
    assert "fit at a 2,048-token context" in r.stderr
    none = cli("models", "search", "no-such-model-anywhere")
    assert none.returncode == 0
    assert none.stdout.strip() == "no GGUF repositories match 'no-such-model-anywhere'"
    bad = cli("models", "--limit", "3")
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "llamadesk: error: --limit belongs to `llamadesk models search`"


def test_a_header_from_a_prefix_is_the_file_header(model_path):
    whole = read_header(model_path)
    size = model_path.stat().st_size
    with open(model_path, "rb") as f:
        prefix = f.read(8 * MiB)
    with pytest.raises(HeaderNeedsMore):
        header_from_prefix(prefix[:MiB], size, "remote.gguf")
    h = header_from_prefix(prefix, size, "remote.gguf")
    assert h.tensors == whole.tensors and h.metadata == whole.metadata and h.size == size


def test_the_kv_cache_is_what_llama_cpp_allocates(model_path):
    """llama.cpp's log for this model: 'KV buffer size = 6.00 MiB' (3 global layers, 2048 cells)
    and '11.25 MiB' (15 sliding-window layers, 512 + 256 cells); 48.00 MiB global at 16384."""
    h = read_header(model_path)
    assert kv_cache_bytes(h, 2048) == (6.00 + 11.25) * MiB
    assert kv_cache_bytes(h, 16384) == (48.00 + 11.25) * MiB
    assert kv_cache_bytes(h, 2000) == kv_cache_bytes(h, 2048)  # cells padded to 256


def test_labels_follow_the_free_memory(model_path):
    p = predict(read_header(model_path), 4096)
    need = p.ram_needed
    assert judge(p, need * 2, None).label == "fits"
    assert judge(p, int(need * 1.1), None).label == "tight"
    assert judge(p, need - 1, None).label == "won't fit"
    assert judge(p, None, None).label == "?"
    gpu = predict(read_header(model_path), 4096, gpu_layers=-1)
    assert gpu.gpu > gpu.kv and judge(gpu, need * 2, gpu.gpu - 1).label == "won't fit"
    assert isinstance(p, Prediction) and "at 4,096 tokens" in p.summary()


def test_bench_fit_predicts_resident_memory_within_ten_percent(model_path):
    tools = dict(os.environ, LLAMADESK_LLAMA_TOOLS=str(llama_tools()))  # the cache is in the real home
    r = cli("bench", "--fit", "--json", "--model", str(model_path), timeout=300, env=tools)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    rows = d["fit"]
    assert [(x["quant"], x["n_ctx"]) for x in rows] == [("Q4_K_M", 2048), ("Q4_K_M", 16384),
                                                         ("Q8_0", 2048), ("Q8_0", 16384)]
    for x in rows:
        assert 0.9 <= x["ratio"] <= 1.1, x
    # the parts that differ are measured to differ: the weights between files, the KV cache between contexts
    # (at least half the predicted difference: a load's resident set moves by MBs with the machine's load)
    assert rows[2]["measured_bytes"] - rows[0]["measured_bytes"] > \
        0.5 * (rows[2]["predicted_bytes"] - rows[0]["predicted_bytes"]) > 15e6
    assert rows[1]["measured_bytes"] - rows[0]["measured_bytes"] > 35e6
    assert d["fit_within_10pct"] is True
