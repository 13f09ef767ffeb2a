"""The serving benchmark's arithmetic in vLLM's terms, on outputs made by hand: no server."""

from __future__ import annotations

import math
import statistics

import pytest

from app.bench.serve_load import question, samples
from app.bench.serving import Output, _intervals, _peak, parse_goodput, summarize

# The keys of `vllm bench serve`'s result file that plotting scripts read.
VLLM_KEYS = {"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
             "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
             "max_concurrent_requests",
             *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
               for stat in ("mean", "median", "std", "p50", "p90", "p99"))}


def out(ttft: float, latency: float, tokens: int, start: float = 0.0, prompt: int = 10) -> Output:
    gaps = [(latency - ttft) / (tokens - 1)] * (tokens - 1) if tokens > 1 else []
    return Output(success=True, prompt_len=prompt, output_tokens=tokens, ttft=ttft, itl=gaps, latency=latency,
                  start_time=start)


def test_tpot_leaves_the_first_token_out_as_vllm_does():
    r = summarize([out(0.5, 1.5, 11)], duration=2.0, goodput={})
    assert r["median_tpot_ms"] == pytest.approx(100.0)  # (1.5 - 0.5) / (11 - 1); GuideLLM's: 1.5 / 11
    assert r["median_itl_ms"] == pytest.approx(100.0) and r["median_ttft_ms"] == pytest.approx(500.0)
    assert "first token excluded" in r["tpot_definition"]


def test_throughput_percentiles_and_the_vllm_keys():
    outs = [out(0.1 * i, 1.0 + 0.1 * i, 5, start=0.2 * i) for i in range(1, 11)]
    outs.append(Output(error="HTTP 500"))
    r = summarize(outs, duration=4.0, goodput={})
    assert VLLM_KEYS <= set(r)
    assert r["completed"] == 10 and r["failed"] == 1 and r["request_goodput"] is None
    assert r["total_output_tokens"] == 50 and r["output_throughput"] == 12.5
    assert r["request_throughput"] == 2.5
    assert r["total_token_throughput"] == (100 + 50) / 4.0
    assert r["median_ttft_ms"] == pytest.approx(550.0)
    assert r["p90_ttft_ms"] == pytest.approx(910.0)  # numpy's linear interpolation, as vLLM
    assert r["mean_e2el_ms"] == pytest.approx(statistics.mean(1.0 + 0.1 * i for i in range(1, 11)) * 1000)


def test_goodput_counts_requests_within_every_slo():
    outs = [out(0.1, 1.1, 11), out(0.9, 1.9, 11), out(0.1, 3.1, 11)]  # fine, slow first token, slow decode
    r = summarize(outs, duration=1.0, goodput={"ttft": 500, "tpot": 150})
    assert r["request_goodput"] == 1.0
    assert summarize(outs, duration=1.0, goodput={"ttft": 500})["request_goodput"] == 2.0


def test_goodput_flags_are_vllms():
    assert parse_goodput(["ttft:500", "tpot:50"]) == {"ttft": 500.0, "tpot": 50.0}
    assert parse_goodput(None) == {}
    for bad in (["ttft"], ["speed:5"], ["ttft:fast"], ["tpot:-1"], ["e2el:nan"]):
        with pytest.raises(ValueError, match="--goodput"):
            parse_goodput(bad)


def test_poisson_arrivals_have_the_rate_asked_for():
    gaps = _intervals(4000, rate=5.0, burstiness=1.0, seed=1)
    assert statistics.mean(gaps) == pytest.approx(0.2, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.2, rel=0.08)  # exponential: the sd is the mean
    bursty = _intervals(4000, rate=5.0, burstiness=0.25, seed=1)
    assert statistics.mean(bursty) == pytest.approx(0.2, rel=0.1) and statistics.stdev(bursty) > 0.3
    assert _intervals(3, math.inf, 1.0, 0) == [0.0, 0.0, 0.0]


def test_peak_concurrency_treats_an_end_before_a_start():
    assert _peak([out(0.1, 1.0, 2, start=0.0), out(0.1, 1.0, 2, start=1.0), out(0.1, 2.0, 2, start=0.5)]) == 2


def test_chat_questions_differ_and_share_the_system_prompt():
    qs = [question(i) for i in range(144)]
    assert len(set(qs)) == 144
    chats = samples("chat", 20)
    assert len({c.messages[1]["content"] for c in chats}) == 20
    assert len({c.messages[0]["content"] for c in chats}) == 1 and len(chats[0].messages[0]["content"]) > 300
    path, body = chats[0].body("m", 8, {"temperature": 0})
    assert path == "/chat/completions" and body["stream"]
    assert body["stream_options"] == {"include_usage": True}
    assert samples("completion", 2)[1].body("m", 8, {})[0] == "/completions"
