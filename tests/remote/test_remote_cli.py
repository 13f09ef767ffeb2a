"""`llamadesk ask|models|batch|bench --endpoint` as a user runs them, against real servers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remote.servers import FaultServer, answer, free_port, relay

KEY = "sk-test-0123456789abcdef"


def _cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _history():
    r = _cli("list", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ask_streams_from_llama_server_says_where_and_records_the_turn(llama_server_v1):
    r = _cli("ask", "--endpoint", llama_server_v1, "--max-tokens", "12", "--temperature", "0",
             "Name a colour.")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "runs on remote llama-server at 127.0.0.1" in r.stderr and "ctx 2048" in r.stderr
    assert "server prefill" in r.stderr and "on llama-server at" in r.stderr
    convs = _history()
    assert len(convs) == 1
    cid = convs[0]["id"]
    r2 = _cli("ask", "--endpoint", llama_server_v1, "--max-tokens", "8", "--temperature", "0", "--json",
              "--continue", str(cid), "And another?")
    assert r2.returncode == 0, r2.stderr
    out = json.loads(r2.stdout)
    assert out["conversation"] == cid and out["stats"]["cached_tokens"] > 0
    assert out["stats"]["source"].startswith("llama-server at") and out["runs_on"].startswith("remote")
    exported = _cli("export", str(cid), "--format", "md")
    assert exported.returncode == 0 and "on llama-server at" in exported.stdout


@pytest.mark.parametrize("args, code, words", [
    (["--endpoint", "http://127.0.0.1:{free}/v1"], 1, "connection refused"),
    (["--endpoint", "localhost:8080"], 2, "not a URL"),
    (["--endpoint", "http://127.0.0.1:{free}/v1", "--api-key-env", "LLAMADESK_NO_SUCH_VAR"], 2,
     "LLAMADESK_NO_SUCH_VAR is not set"),
    (["--endpoint", "http://127.0.0.1:{free}/v1", "--model", "x.gguf"], 2, "give one"),
    (["--remote-model", "m"], 2, "--remote-model needs --endpoint"),
])
def test_bad_configuration_exits_2_and_remote_failure_exits_1(args, code, words):
    args = [a.replace("{free}", str(free_port())) for a in args]
    r = _cli("ask", "--no-save", *args, "hi")
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.stderr


def test_a_refused_key_is_shown_masked_and_stored_nowhere(isolated_dirs):
    err = json.dumps({"error": {"message": "Incorrect API key provided"}})
    srv = FaultServer(lambda h: answer(h, 401, err))
    try:
        r = _cli("ask", "--endpoint", srv.base + "/v1", "--api-key-env", "LLAMADESK_TEST_KEY", "hi",
                 env={**os.environ, "LLAMADESK_TEST_KEY": KEY})
    finally:
        srv.stop()
    assert r.returncode == 1
    assert "refused the API key" in r.stderr and "cdef" in r.stderr and KEY not in r.stderr + r.stdout
    for f in Path(isolated_dirs).rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_a_reply_cut_mid_stream_keeps_the_text_marked_interrupted(llama_server):
    srv = FaultServer(lambda h: relay(h, srv, cut_after=6) if h.command == "POST" else relay(h, srv),
                      llama_server.base)
    try:
        r = _cli("ask", "--endpoint", srv.base + "/v1", "--max-tokens", "200", "--temperature", "0",
                 "Tell me a story.")
    finally:
        srv.stop()
    assert r.returncode == 1, r.stderr
    assert r.stdout.strip() and "the reply stopped" in r.stderr and "Traceback" not in r.stderr
    conv = _history()[0]
    shown = _cli("export", str(conv["id"]), "--format", "json")
    doc = json.loads(shown.stdout)["conversation"]
    msgs = doc["messages"]
    assert doc["settings"]["model"]["remote"]["server"] == "llama-server" and doc["model"]
    assert msgs[-1]["role"] == "assistant" and msgs[-1]["content"].strip() == r.stdout.strip()
    assert msgs[-1]["state"] == "interrupted"


def test_models_lists_the_servers_models(llama_server_v1, model_path):
    r = _cli("models", "--endpoint", llama_server_v1, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["server"] == "llama-server"
    assert [m["id"] for m in out["models"]] == [str(model_path)] and out["models"][0]["n_ctx"] == 2048


def test_batch_through_the_server_journals_every_request_and_resumes(llama_server_v1, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("".join(f"Name thing number {i}.\n" for i in range(6)))
    out = tmp_path / "out.jsonl"
    args = ["batch", str(prompts), "-o", str(out), "--endpoint", llama_server_v1, "--parallel", "4",
            "--max-tokens", "8", "--temperature", "0", "--quiet"]
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 6 and all(rec["error"] is None for rec in recs)
    for rec in recs:
        usage = rec["response"]["body"]["usage"]
        assert usage["completion_tokens"] == rec["llamadesk"]["completion_tokens"] > 0
    assert "batch: 6 ok" in r.stderr and "4 requests at a time" in r.stderr
    again = _cli(*args)
    assert again.returncode == 0 and "nothing to do" in again.stderr


def test_bench_endpoint_puts_client_figures_beside_the_servers(llama_server_v1):
    r = _cli("bench", "--endpoint", llama_server_v1, "--json", "--tokens", "8", "--rounds", "1")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["server"] == "llama-server" and d["server_decode_tok_s"] > 0 and d["wall_decode_tok_s"] > 0
    assert d["client_decode_ratio"] > 0 and d["ttft_vs_server"] > 0
    assert set(d["concurrency"]) == {"1", "4", "8"}
    assert all(v["errors"] == 0 and v["aggregate_tok_s"] > 0 for v in d["concurrency"].values())
    assert d["second_turn_cached_tokens"] > 0


def test_the_history_database_never_holds_the_key(llama_server_v1, isolated_dirs):
    r = _cli("ask", "--endpoint", llama_server_v1, "--api-key-env", "LLAMADESK_TEST_KEY", "--max-tokens", "4",
             "hi", env={**os.environ, "LLAMADESK_TEST_KEY": KEY})
    assert r.returncode == 0, r.stderr  # llama-server without --api-key takes any key
    dbs = list(Path(isolated_dirs).rglob("*.db")) + list(Path(isolated_dirs).rglob("*.sqlite*"))
    assert dbs
    for db in dbs:
        dump = "\n".join(sqlite3.connect(db).iterdump())
        assert KEY not in dump and llama_server_v1 in dump
