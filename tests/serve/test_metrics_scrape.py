"""A live `llamadesk serve` under `bench --serve --endpoint`'s load: the run reads as a vLLM result,
and /metrics, parsed by prometheus_client's own parser, carries vLLM's and llama-server's names
with the load's counts, and the chat load's shared system prompt as prefix cache hits."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.bench.serve_load import run_endpoint_serve
from tests.serve.conftest import MODEL_ID


def scrape(base: str) -> dict:
    text = httpx.get(base + "/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_chat_sweep_reads_as_vllms_result_and_the_metrics_count_it(serve):
    mn = frozenset({("model_name", MODEL_ID)})
    before = scrape(serve.base)
    got = run_endpoint_serve(serve.base + "/v1", None, None, "chat", 4, (1, 2), num_prompts=4)
    after = scrape(serve.base)
    runs = got["runs"]
    assert got["model"] == MODEL_ID and [r["max_concurrency"] for r in runs] == [1, 2]
    for r in runs:
        assert r["completed"] == 4 and r["failed"] == 0 and r["total_output_tokens"] == 16
        assert r["median_ttft_ms"] > 0 and r["p99_e2el_ms"] >= r["median_e2el_ms"] > 0
        assert r["request_rate"] == "inf" and r["endpoint_type"] == "openai-chat"

    def grew(name: str, labels=mn) -> float:
        return after.get((name, labels), 0.0) - before.get((name, labels), 0.0)

    done = frozenset({*mn, ("finished_reason", "length")})
    assert grew("vllm:request_success_total", done) == 8
    assert grew("vllm:generation_tokens_total") == 32
    assert grew("vllm:time_to_first_token_seconds_count") == 8
    assert grew("vllm:inter_token_latency_seconds_count") == 8 * 3
    # Every request starts with the same system prompt: after the first, it is found, not evaluated.
    assert grew("vllm:prefix_cache_hits_total") > 7 * 50
    assert grew("llamacpp:tokens_predicted_total", frozenset()) == 32
    assert ("vllm:num_requests_running", mn) in after
    assert ("llamacpp:requests_processing", frozenset()) in after
