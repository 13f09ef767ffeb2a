"""`llamadesk serve` with two models, for real: the bundled file and a llama-quantize Q8_0 copy,
a real server child process, the official openai client and plain HTTP on real sockets.

With `--models-max 1` every switch unloads the other model, so these tests also prove the least
recently used one goes; llama-server's router endpoints (GET /models, POST /models/load and
/models/unload) are asked as its clients ask them. Replies are a few tokens: what is tested is
which model answers, not what it says."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

import httpx
import openai
import pytest

from tests.remote.servers import Process, free_port
from tests.serve.harness import create_batch, error, serve_env, upload, wait_batch

Q8 = "gemma-3-270m-served-Q8_0.gguf"


@pytest.fixture(scope="module")
def q8_copy(model_path, tmp_path_factory) -> Path:
    """The bundled model requantized to Q8_0 by llama.cpp's llama-quantize (as tests/hub's copy
    is), or by the llama_model_quantize it wraps where the tools are not built yet."""
    from app.bench.serve_models import q8_copy as requantize

    dst = tmp_path_factory.mktemp("servedq") / Q8
    requantize(model_path, dst)
    return dst


def start_models(home: Path, *paths: Path, extra: tuple[str, ...] = ()) -> Process:
    port = free_port()
    args = [sys.executable, "-m", "app", "serve", "--port", str(port), "--ctx", "2048", "--threads", "2",
            "--parallel", "2"]
    for p in paths:
        args += ["--model", str(p)]
    return Process([*args, *extra], port, "/health", serve_env(home))


@pytest.fixture(scope="module")
def two(model_path, q8_copy, tmp_path_factory):
    home = tmp_path_factory.mktemp("two-models")
    srv = start_models(home, model_path, q8_copy, extra=("--models-max", "1"))
    yield srv
    srv.stop()


@pytest.fixture
def client(two):
    with openai.OpenAI(base_url=two.base + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def statuses(srv: Process) -> dict[str, str]:
    r = httpx.get(srv.base + "/models", timeout=30)
    assert r.status_code == 200, r.text
    return {m["id"]: m["status"]["value"] for m in r.json()["data"]}


def ask(client, model: str) -> str:
    r = client.chat.completions.create(model=model, max_tokens=3, temperature=0,
                                       messages=[{"role": "user", "content": "Name a colour."}])
    assert r.choices[0].message.content is not None
    return r.model  # the model that answered, by its id


def test_both_listed(client, model_path):
    listed = {m.id: m for m in client.models.list()}
    assert set(listed) == {model_path.name, Q8}
    assert client.models.retrieve(Q8).id == Q8


def test_both_answer_and_the_least_recently_used_is_unloaded(client, two, model_path):
    a = model_path.name
    assert ask(client, a) == a
    assert statuses(two) == {a: "loaded", Q8: "unloaded"}
    assert ask(client, Q8) == Q8  # past --models-max 1: a goes
    assert statuses(two) == {a: "unloaded", Q8: "loaded"}
    stream = client.chat.completions.create(model=a, max_tokens=3, temperature=0, stream=True,
                                            messages=[{"role": "user", "content": "Hi"}])
    assert all(c.model == a for c in stream)
    assert statuses(two) == {a: "loaded", Q8: "unloaded"}
    text = httpx.get(two.base + "/metrics", timeout=30).text
    loads = re.search(rf'llamadesk_model_load_seconds_count{{model="{re.escape(a)}"}} (\S+)', text)
    assert loads and float(loads[1]) >= 2, text[:3000]
    assert f'llamadesk_model_unloads_total{{model="{Q8}",reason="lru"}} 1.0' in text
    assert f'llamadesk_model_loaded{{model="{a}"}} 1.0' in text
    assert f'vllm:request_success_total{{finished_reason="length",model_name="{a}"}}' in text


def test_router_unload_then_a_request_reloads(client, two, model_path):
    a = model_path.name
    r = httpx.post(two.base + "/models/load", json={"model": Q8}, timeout=60)
    assert r.status_code == 200 and r.json() == {"success": True}, r.text
    assert statuses(two)[Q8] == "loaded"
    r = httpx.post(two.base + "/models/unload", json={"model": Q8}, timeout=60)
    assert r.json() == {"success": True}, r.text
    assert statuses(two) == {a: "unloaded", Q8: "unloaded"}
    assert "not loaded" in error(httpx.post(two.base + "/models/unload", json={"model": Q8}, timeout=30),
                                 400)["message"]
    assert ask(client, Q8.removesuffix(".gguf")) == Q8  # llama-server's name for a --models-dir file
    assert statuses(two)[Q8] == "loaded"
    meta = next(m for m in httpx.get(two.base + "/models").json()["data"] if m["id"] == Q8)["meta"]
    assert 0 < meta["load_s"] < 30 and meta["memory_needed"] > meta["size"] > 0


def test_requests_for_a_loading_model_wait_for_it(two, model_path):
    a = model_path.name
    if statuses(two)[a] == "loaded":
        httpx.post(two.base + "/models/unload", json={"model": a}, timeout=60)
    got: list = []

    def one():
        got.append(httpx.post(two.base + "/v1/completions", timeout=120,
                              json={"model": a, "prompt": "One, two,", "max_tokens": 2}).status_code)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == [200, 200, 200]
    assert statuses(two)[a] == "loaded"


def test_every_model_route_goes_by_its_model(client, two, model_path):
    """The Responses API and the tokenizer endpoints too: POST by the body's model, GET
    /tokenizer_info by the `model` query parameter (as llama-server's router routes a GET)."""
    r = client.responses.create(model=Q8, input="Name a colour.", max_output_tokens=3)
    assert r.model == Q8 and r.output
    r = httpx.post(two.base + "/tokenize", json={"model": Q8, "prompt": "Hello"}, timeout=60)
    assert r.status_code == 200 and r.json()["count"] >= 2, r.text
    r = httpx.get(two.base + "/tokenizer_info", params={"model": Q8}, timeout=60)
    assert r.status_code == 200 and r.json()["bos_token"], r.text
    assert error(httpx.get(two.base + "/tokenizer_info", timeout=30), 404)["code"] == "model_not_found"


def test_a_client_that_leaves_mid_stream_lets_its_model_go(two):
    """Its request is cancelled and its hold on the model released: the model can be unloaded."""
    body = {"model": Q8, "max_tokens": 400, "stream": True, "ignore_eos": True,
            "messages": [{"role": "user", "content": "Tell a long story."}]}
    with httpx.stream("POST", two.base + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        next(line for line in r.iter_lines() if '"content"' in line)
    for _ in range(100):  # the server sees the client gone at its next token
        r = httpx.post(two.base + "/models/unload", json={"model": Q8}, timeout=60)
        if r.status_code != 409:
            break
        threading.Event().wait(0.05)
    assert r.status_code == 200 and statuses(two)[Q8] == "unloaded", r.text


def test_an_unknown_model_is_named(client, two, model_path):
    with pytest.raises(openai.NotFoundError) as e:
        ask(client, "gpt-4o")
    msg = str(e.value)
    assert "'gpt-4o' does not exist" in msg and model_path.name in msg and Q8 in msg
    body = error(httpx.post(two.base + "/models/load", json={"model": "gpt-4o"}, timeout=30), 404)
    assert body["code"] == "model_not_found" and body["param"] == "model"
    body = error(httpx.post(two.base + "/v1/chat/completions", timeout=30,
                            json={"messages": [{"role": "user", "content": "Hi"}]}), 400)
    assert "say which model" in body["message"]


def test_a_batch_runs_on_the_model_its_lines_name(two):
    lines = [json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": Q8, "max_tokens": 2, "temperature": 0,
                                  "messages": [{"role": "user", "content": "Name a colour."}]}})
             for i in range(3)]
    f = upload(two.base, ("\n".join(lines) + "\n").encode())
    b = wait_batch(two.base, create_batch(two.base, f["id"])["id"], timeout=120)
    assert b["status"] == "completed" and b["request_counts"]["completed"] == 3, b
    out = httpx.get(two.base + f"/v1/files/{b['output_file_id']}/content", timeout=30).text
    assert [json.loads(x)["response"]["body"]["model"] for x in out.splitlines()] == [Q8] * 3

    emb = json.dumps({"custom_id": "e", "method": "POST", "url": "/v1/embeddings",
                      "body": {"model": Q8, "input": "Name a colour."}})
    r = httpx.post(two.base + "/v1/batches", timeout=30, json={
        "input_file_id": upload(two.base, (emb + "\n").encode())["id"], "endpoint": "/v1/embeddings",
        "completion_window": "24h"})
    b = wait_batch(two.base, r.json()["id"], timeout=120)
    out = httpx.get(two.base + f"/v1/files/{b['output_file_id']}/content", timeout=30).json()
    assert out["response"]["body"]["model"] == Q8 and len(out["response"]["body"]["data"][0]["embedding"]) > 0

    other = lines[0].replace(Q8, "gpt-4o")
    f = upload(two.base, (lines[1] + "\n" + other + "\n").encode())
    r = httpx.post(two.base + "/v1/batches", timeout=30, json={
        "input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"})
    body = error(r, 400)
    assert "line 2" in body["message"] and "'gpt-4o' does not exist" in body["message"]


def test_past_memory_is_503_naming_the_need_and_a_slow_load_is_bounded(model_path, q8_copy, tmp_path):
    """With a memory budget between the two models' needs, and requests that load nothing
    unless they ask (llama-server's --no-models-autoload and ?autoload=true)."""
    from app.engine.loader import LoadOptions
    from app.serve.models_api import ServeSettings

    settings = ServeSettings(LoadOptions(n_ctx=256), n_slots=2, slot_ctx=2048)
    small, big = settings.spec(model_path).need, settings.spec(q8_copy).need
    assert big > small
    budget = (small + (big - small) // 2) / 2**20
    srv = start_models(tmp_path, model_path, q8_copy, extra=(
        "--models-memory", f"{budget:.1f}", "--models-load-wait", "0.001", "--no-models-autoload"))
    a = model_path.name

    def complete(model: str, autoload: bool | None = None) -> httpx.Response:
        return httpx.post(srv.base + "/v1/completions", timeout=60,
                          params={} if autoload is None else {"autoload": str(autoload).lower()},
                          json={"model": model, "prompt": "Hi", "max_tokens": 2})

    try:
        body = error(complete(Q8, autoload=True), 503)
        assert body["code"] == "model_too_large" and Q8 in body["message"] and "needs" in body["message"]
        assert f"{big / 1e6:.1f} MB" in body["message"]
        body = error(complete(a), 503)
        assert body["code"] == "model_not_loaded" and "POST /models/load" in body["message"]
        r = complete(a, autoload=True)
        assert error(r, 503)["code"] == "model_loading" and r.headers["retry-after"] == "1"
        for _ in range(600):  # the load went on: the model is there for the next request
            if statuses(srv)[a] == "loaded":
                break
            threading.Event().wait(0.05)
        r = complete(a)
        assert r.status_code == 200, r.text
    finally:
        srv.stop()
