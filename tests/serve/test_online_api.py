"""The online API through the official `openai` package, and raw HTTP for what it would not send."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import MODEL_ID

HI = [{"role": "user", "content": "Name a colour."}]


def test_models_and_a_whole_chat_reply_with_usage_and_timings(client):
    assert [m.id for m in client.models.list()] == [MODEL_ID]
    r = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=8, temperature=0)
    assert r.choices[0].message.role == "assistant" and r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    t = r.model_extra["timings"]
    assert t["predicted_n"] == u.completion_tokens and t["prompt_n"] + t["cache_n"] == u.prompt_tokens
    assert t["prompt_ms"] > 0


def test_streaming_with_usage_is_the_same_text_as_its_deltas(client):
    stream = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    parts, usage, finishes = [], None, []
    for ch in stream:
        if ch.choices:
            parts.append(ch.choices[0].delta.content or "")
            finishes.append(ch.choices[0].finish_reason)
        if ch.usage:
            usage = ch.usage
    assert "".join(parts) and finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1])
    assert usage is not None and usage.completion_tokens > 0


def test_a_next_turn_reuses_the_cached_prefix(client):
    first = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=8, temperature=0)
    turn = [*HI, {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "And another one?"}]
    second = client.chat.completions.create(model=MODEL_ID, messages=turn, max_tokens=8, temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens


def test_plain_completions(client):
    r = client.completions.create(model=MODEL_ID, prompt="User: Hello\nAssistant:", max_tokens=6,
                                  temperature=0)
    assert r.choices[0].text and r.usage.completion_tokens <= 6


@pytest.mark.parametrize("body, status, param", [
    ({"model": "nope", "messages": HI}, 404, "model"),
    ({"model": MODEL_ID, "messages": HI, "n": 0}, 400, "n"),
    ({"model": MODEL_ID, "messages": HI, "n": 1000}, 400, "n"),
    ({"model": MODEL_ID, "messages": HI, "tools": [{"type": "function"}]}, 400, "tools"),
    ({"model": MODEL_ID, "messages": HI, "logprobs": "yes"}, 400, "logprobs"),
    ({"model": MODEL_ID, "messages": HI, "top_logprobs": 3}, 400, "top_logprobs"),
    ({"model": MODEL_ID, "messages": HI, "logprobs": True, "top_logprobs": 21}, 400, "top_logprobs"),
    ({"model": MODEL_ID, "messages": HI, "logit_bias": {"cat": 1}}, 400, "logit_bias"),
    ({"model": MODEL_ID, "messages": HI, "logit_bias": {"12": 101}}, 400, "logit_bias"),
    ({"model": MODEL_ID, "messages": HI, "temperature": "hot"}, 400, "temperature"),
    ({"model": MODEL_ID, "messages": HI, "max_tokens": 2.5}, 400, "max_tokens"),
    ({"model": MODEL_ID, "messages": HI, "presence_penalty": 2.5}, 400, "presence_penalty"),
    ({"model": MODEL_ID, "messages": HI, "best_of": 3}, 400, "best_of"),
    ({"model": MODEL_ID, "messages": HI, "response_format": {"type": "xml"}}, 400, "response_format"),
    ({"model": MODEL_ID, "messages": HI, "frobnicate": 1}, 400, "frobnicate"),
    ({"model": MODEL_ID, "messages": "hi"}, 400, "messages"),
    ({"model": MODEL_ID}, 400, "messages"),
    ({"messages": HI}, 400, "model"),
])
def test_bad_requests_name_the_parameter_in_openais_error_shape(serve, body, status, param):
    r = httpx.post(serve.base + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["param"] == param and err["message"]


def test_malformed_json_a_huge_body_and_a_prompt_too_long(serve):
    r = httpx.post(serve.base + "/v1/chat/completions", content=b'{"model": ', timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.post(serve.base + "/v1/chat/completions", content=b"x" * (9 * 1024 * 1024), timeout=30)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    long = "word " * 5000
    r = httpx.post(serve.base + "/v1/completions", json={"model": MODEL_ID, "prompt": long}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    r = httpx.post(serve.base + "/v1/chat/completions", timeout=60,
                   json={"model": MODEL_ID, "messages": [{"role": "user", "content": long}]})
    assert r.status_code == 400 and "slot holds" in r.json()["error"]["message"]
    assert httpx.get(serve.base + "/health", timeout=5).json() == {"status": "ok"}  # still serving


def test_a_client_that_leaves_mid_stream_frees_its_slot(serve, client):
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 1500, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", serve.base + "/v1/chat/completions", json=body, timeout=60) as r:
        n = 0
        for line in r.iter_lines():
            n += line.startswith("data: {")
            if n == 4:
                break
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        busy = [line for line in httpx.get(serve.base + "/metrics", timeout=5).text.splitlines()
                if line.startswith("llamadesk_slots_busy ")]
        if busy and float(busy[0].split()[1]) == 0:
            break
        time.sleep(0.1)
    assert busy and float(busy[0].split()[1]) == 0, busy


def test_metrics_count_requests_tokens_and_ttft(serve, client):
    client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=4, temperature=0)
    text = httpx.get(serve.base + "/metrics", timeout=5).text
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert values['llamadesk_requests_total{endpoint="/v1/chat/completions",outcome="200"}'] >= 1
    assert values['llamadesk_tokens_total{kind="generated"}'] >= 1
    assert values['llamadesk_time_to_first_token_seconds_count{api="online"}'] >= 1
    assert "llamadesk_slots_total" in values and "llamadesk_queue_depth" in values


def test_llamadesks_remote_engine_gets_the_local_engines_fields(serve):
    from app.chat.remote_engine import RemoteChatEngine
    from app.engine.sampling import GenerationSettings
    from app.remote.endpoint import Endpoint

    eng = RemoteChatEngine(Endpoint.parse(serve.base + "/v1"))
    try:
        assert eng.info.kind == "llamadesk serve" and eng.n_ctx == 2048
        r = eng.reply([], "Name a colour.", GenerationSettings(max_tokens=6, temperature=0, ignore_eos=True))
    finally:
        eng.close()
    st = r.stats
    assert r.text and st.decode_tokens == 6
    for name in ("prefill_tokens", "cached_tokens", "prefill_s", "prefill_tok_s", "decode_s", "decode_tok_s",
                 "kv_used", "n_ctx", "wall_decode_tok_s", "ttft_s", "prompt_tokens"):
        assert getattr(st, name) is not None, name
    assert json.dumps(st.to_json())  # the same record the local engine writes


def test_bench_serve_compares_with_llama_server_in_one_run():
    import os
    import subprocess
    import sys

    from tests.remote.servers import llama_tools

    env = {**os.environ, "LLAMADESK_LLAMA_TOOLS": str(llama_tools())}  # the cache is in the real home
    # Two levels on 8 slots: what is asked for is what is run, at a third of the default sweep's cost.
    r = subprocess.run([sys.executable, "-m", "app", "bench", "--serve", "--json", "--tokens", "8",
                        "--concurrency", "1,8", "--parallel", "8"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["slots"] == 8
    for side in ("llamadesk", "llama_server"):
        assert set(d[side]) == {"1", "8"} and set(d["chat"][side]) == {"1", "8"}
        assert all(v["aggregate_tok_s"] > 0 and v["p95_ttft_s"] >= v["p50_ttft_s"] for v in d[side].values())
    assert set(d["aggregate_ratio"]) == {"1", "8"} and d["online_ttft_ratio"] > 0
    assert {"chat_8_vs_1_llamadesk", "completion_8_vs_1_llama_server"} <= set(d["targets"])
    # The same load: both servers evaluated the same prompt tokens.
    ours, theirs = d["llamadesk"], d["llama_server"]
    assert all(ours[n]["prompt_tokens"] == theirs[n]["prompt_tokens"] > 0 for n in ours)
    assert d["batch_still_running"]  # the online TTFT was measured while the batch ran


def test_a_completion_without_max_tokens_writes_openais_default_of_16(client):
    from app.engine.sampling import GenerationSettings
    from app.openai_compat.params import COMPLETION_MAX_TOKENS

    r = client.completions.create(model=MODEL_ID, prompt="Once upon a time", temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == COMPLETION_MAX_TOKENS == 16 and r.choices[0].finish_reason == "length"
    r = client.chat.completions.create(model=MODEL_ID, messages=HI, temperature=0, max_completion_tokens=20,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 20 < GenerationSettings().max_tokens
