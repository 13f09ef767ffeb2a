"""/metrics read by a real Prometheus parser (prometheus_client.parser): LlamaDesk's names, vLLM's
(labelled model_name) and llama-server's, from one set of finished requests. No model, no server."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from app.serve.engine_host import HostStats
from app.serve.metrics import LATENCY_BUCKETS, ServeMetrics, decades
from app.slots.types import SlotResult, SlotStats

MODEL = "gemma-3-270m-q4_k_m.gguf"


def host(**stats) -> SimpleNamespace:
    return SimpleNamespace(stats=HostStats(**stats), model=SimpleNamespace(header=SimpleNamespace(
        path=Path("/models") / MODEL)))


def result(stop: str = "length", started: bool = True, gen: int = 5) -> SlotResult:
    st = SlotStats(prompt_tokens=100, completion_tokens=gen, cached_tokens=90, stop_reason=stop, online=True,
                   queued_at=0.0, slot_start=0.1 if started else None, first_token_at=0.3, finished_at=0.7,
                   ttft_from_queue_s=0.3, ttft_from_slot_s=0.2, queue_wait_s=0.1, total_s=0.7,
                   decode_tok_s=10.0)
    return SlotResult("o1", "text", st, itl_s=[0.1] * (gen - 1) if started else ())


def scrape(m: ServeMetrics) -> dict:
    """{(sample name, frozenset(labels)): value} and the families' types, as Prometheus reads them."""
    fams = list(text_string_to_metric_families(m.render().decode()))
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in fams for s in f.samples}
    return {"samples": samples, "types": {f.name: f.type for f in fams}}


def value(d: dict, name: str, **labels) -> float:
    return d["samples"][(name, frozenset(labels.items()))]


def test_every_name_a_dashboard_reads_is_there_and_parses():
    m = ServeMetrics(host(busy=3, queued=2, n_slots=4, kv_used=300, kv_cells=1200, steps=10, step_slots=25))
    m.observe(result())
    d = scrape(m)
    t, v = d["types"], lambda name, **lb: value(d, name, **lb)
    mn = {"model_name": MODEL}
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert t[name] == "gauge"
    for name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:prompt_tokens",
                 "vllm:generation_tokens", "vllm:request_success", "llamacpp:prompt_tokens",
                 "llamacpp:tokens_predicted", "llamacpp:prompt_tokens_cached", "llamacpp:n_decode"):
        assert t[name] == "counter", name
    for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                 "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"):
        assert t[name] == "histogram" and v(f"{name}_count", **mn) >= 1, name
    assert v("vllm:num_requests_running", **mn) == 3 and v("vllm:num_requests_waiting", **mn) == 2
    assert v("vllm:kv_cache_usage_perc", **mn) == 0.25
    assert v("vllm:prefix_cache_queries_total", **mn) == 100 and v("vllm:prefix_cache_hits_total", **mn) == 90
    assert v("vllm:prompt_tokens_total", **mn) == 100 and v("vllm:generation_tokens_total", **mn) == 5
    assert v("vllm:request_success_total", **mn, finished_reason="length") == 1
    assert v("vllm:inter_token_latency_seconds_count", **mn) == 4  # one per gap between the 5 tokens
    assert abs(v("vllm:request_decode_time_seconds_sum", **mn) - 0.4) < 1e-9
    # llama-server's meanings: prompt tokens exclude the cached ones; unlabelled gauges.
    assert v("llamacpp:prompt_tokens_total") == 10 and v("llamacpp:prompt_tokens_cached_total") == 90
    assert v("llamacpp:tokens_predicted_total") == 5 and v("llamacpp:requests_processing") == 3
    assert v("llamacpp:requests_deferred") == 2 and v("llamacpp:n_busy_slots_per_decode") == 2.5
    assert v("llamacpp:n_decode_total") == 10
    assert v("llamadesk_tokens_total", kind="generated") == 5  # LlamaDesk's own names stay


def test_a_cancelled_request_is_an_abort_and_one_refused_before_a_slot_counts_no_tokens():
    m = ServeMetrics(host())
    m.observe(result("cancelled"))
    m.observe(result("error", started=False))
    d = scrape(m)
    mn = {"model_name": MODEL}
    assert value(d, "vllm:request_success_total", **mn, finished_reason="abort") == 1
    assert value(d, "vllm:request_success_total", **mn, finished_reason="error") == 1
    assert value(d, "vllm:prompt_tokens_total", **mn) == 100  # the cancelled one ran; the refused one not
    assert value(d, "llamacpp:prompt_tokens_total") == 0


def test_latency_buckets_are_fine_enough_for_a_p99():
    """Ten a decade: neighbouring bounds at most 28% apart, from 1 ms to 1000 s."""
    b = LATENCY_BUCKETS
    assert b[0] == 0.001 and b[-1] == 1000.0 and len(b) == 61
    assert all(1 < hi / lo <= 1.28 + 1e-9 for lo, hi in itertools.pairwise(b))
    assert decades(0, 1) == (1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8, 10.0)


def test_the_docstring_no_longer_says_a_colon_is_illegal():
    import app.serve.metrics as mod

    assert "not legal" not in (mod.__doc__ or "") and "colon is legal" in (mod.__doc__ or "")


def test_the_panels_live_ttft_quantiles_follow_the_last_minute():
    from collections import deque

    from app.serve.engine_host import TTFT_WINDOW_S

    s, window = HostStats(), deque()
    assert s.ttft_p50_s is None and s.ttft_n == 0
    for i in range(100):  # 0.01 .. 1.00 s, one a second
        s.took(window, float(i), (i + 1) / 100)
    assert s.ttft_n == TTFT_WINDOW_S + 1 and s.ttft_p50_s == 0.7 and s.ttft_p99_s == 1.0
    s.took(window, 500.0, 0.2)  # a minute of silence: only the newest is left
    assert s.ttft_n == 1 and s.ttft_p50_s == s.ttft_p99_s == 0.2


def test_speculation_is_counted_under_llama_servers_and_vllms_spec_decode_names():
    m = ServeMetrics(host())
    spec = replace(result().stats, spec_mode="ngram", draft_tokens=12, draft_accepted=9, spec_checks=3,
                   draft_accepted_per_pos=[3, 3, 2, 1])
    m.observe(SlotResult("o1", "text", spec))
    m.observe(result())  # a reply that did not speculate adds nothing
    d = scrape(m)
    mn = {"model_name": MODEL}
    for kind, n in (("drafts", 3), ("draft_tokens", 12), ("accepted_tokens", 9)):
        names = (f"llamacpp:spec_decode_num_{kind}", f"vllm:spec_decode_num_{kind}")
        assert [d["types"][name] for name in names] == ["counter", "counter"]
        assert value(d, f"llamacpp:spec_decode_num_{kind}_total") == n
        assert value(d, f"vllm:spec_decode_num_{kind}_total", **mn) == n
    for i, n in enumerate([3, 3, 2, 1]):
        assert value(d, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) == n
        assert value(d, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i), **mn) == n
