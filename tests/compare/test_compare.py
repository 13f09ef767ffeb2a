"""`llamadesk compare` on real targets: two quantizations made by llama.cpp's own llama-quantize,
one file at two thread counts, a remote llama-server, and targets that fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.compare.run import run_comparison
from app.compare.targets import Target, apply_set
from app.engine.control import CancelToken
from app.engine.sampling import GenerationSettings
from tests.remote.servers import free_port, llama_tools, start_llama_server


@pytest.fixture(scope="session")
def quantized(model_path, tmp_path_factory):
    """The bundled model requantized to Q8_0 and Q4_0: genuinely different files."""
    tools = llama_tools()
    out = tmp_path_factory.mktemp("quant")
    made = {}
    for q in ("Q8_0", "Q4_0"):
        dst = out / f"gemma-3-270m-{q.lower()}.gguf"
        subprocess.run([str(tools / "llama-quantize"), "--allow-requantize", str(model_path), str(dst), q],
                       check=True, capture_output=True, env={**os.environ, "LD_LIBRARY_PATH": str(tools)})
        made[q] = dst
    return made


def _compare(*args):
    return subprocess.run([sys.executable, "-m", "app", "compare", *args], capture_output=True, text=True,
                          timeout=600)


def test_two_quantizations_side_by_side(quantized, tmp_path):
    q8, q4 = quantized["Q8_0"], quantized["Q4_0"]
    assert q8.stat().st_size > q4.stat().st_size
    r = _compare("Name three colours.", "--model", str(q8), "--model", str(q4), "--max-tokens", "12",
                 "--repeat", "2", "--json", "-o", str(tmp_path / "cmp.md"))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [row["target"] for row in d["rows"]] == [q8.name, q4.name]
    for row in d["rows"]:
        st = row["stats"]
        assert row["runs"] == 2 and row["error"] is None and row["text"]
        assert st["decode_tok_s"] > 0 and st["ttft_s"] > 0 and 0 < st["decode_tokens"] <= 12
        assert st["peak_rss_bytes"] > 100e6  # the model's pages, at least
        assert 0.5 < st["predicted_total_s"] / st["total_s"] < 1.5
        lo, hi = row["spread"]["decode_tok_s"]
        assert lo <= st["decode_tok_s"] <= hi
    assert d["best"]["decode_tok_s"]["target"] in (q8.name, q4.name)
    md = (tmp_path / "cmp.md").read_text()
    assert md.startswith("| target |") and q8.name in md and "### " in md


def test_one_file_at_two_thread_counts_and_the_settings_kept(model_path, tmp_path):
    r = _compare("Say hi.", "--model", str(model_path), "--set", "threads=1", "--model", str(model_path),
                 "--set", "threads=2", "--set", "temperature=0.5", "--set", "seed=3", "--max-tokens", "8",
                 "--repeat", "1", "--json", "-o", str(tmp_path / "cmp.csv"))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [row["settings"]["threads"] for row in rows] == [1, 2]
    assert rows[1]["settings"]["temperature"] == 0.5 and "temperature" not in rows[0]["settings"]
    assert rows[0]["target"].endswith("[threads=1]")
    csv = (tmp_path / "cmp.csv").read_text().splitlines()
    assert csv[0].startswith("target,kind,settings,runs,ttft_s") and len(csv) == 3


def test_a_failing_target_says_why_and_the_others_run(model_path, llama_server_v1):
    r = _compare("Say hi.", "--model", str(model_path), "--model", "/nonexistent/model.gguf",
                 "--endpoint", f"http://127.0.0.1:{free_port()}/v1", "--endpoint", llama_server_v1,
                 "--max-tokens", "6", "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["runs"] == 1 and rows[3]["runs"] == 1
    assert "no such file" in rows[1]["error"] and "connection refused" in rows[2]["error"]
    assert rows[3]["kind"] == "endpoint" and rows[3]["stats"]["decode_tok_s"] > 0  # the server's own figure
    assert "no such file" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def keyed_server(model_path):
    """llama-server that answers only with `Authorization: Bearer <its key>`."""
    srv = start_llama_server(model_path, slots=2, ctx=4096, extra=("--api-key", "sk-compare-0123456789"))
    yield srv
    srv.stop()


def test_compare_reaches_a_server_that_needs_a_key(keyed_server, model_path):
    url = keyed_server.base + "/v1"
    env = {**os.environ, "COMPARE_KEY": "sk-compare-0123456789"}
    common = ["Say hi.", "--model", str(model_path), "--endpoint", url, "--max-tokens", "6", "--repeat", "1",
              "--json"]
    r = subprocess.run([sys.executable, "-m", "app", "compare", *common, "--api-key-env", "COMPARE_KEY",
                        "--remote-format", "transcript", "--stall-timeout", "30"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["rows"][1]
    assert row["error"] is None and row["runs"] == 1 and row["text"]
    assert row["settings"]["prompt_format"] == "transcript"
    assert "sk-compare" not in r.stdout + r.stderr, "the key is never printed"
    # Without the key the same server refuses, and the row says so in one line.
    r = subprocess.run([sys.executable, "-m", "app", "compare", *common], capture_output=True, text=True,
                       timeout=600, env=env)
    row = json.loads(r.stdout)["rows"][1]
    assert row["runs"] == 0 and ("401" in row["error"] or "key" in row["error"].lower()), row["error"]


@pytest.mark.parametrize("args, words", [
    (["hi", "--set", "threads=1", "--model", "a.gguf", "--model", "b.gguf"], "name a target"),
    (["hi", "--model", "a.gguf", "--set", "colour=red", "--model", "b.gguf"], "unknown setting"),
    (["hi", "--model", "a.gguf", "--set", "threads=zero", "--model", "b.gguf"], "whole number"),
    (["hi", "--model", "a.gguf"], "2 to 6 targets"),
    (["hi", "--endpoint", "http://x:1/v1", "--set", "threads=2", "--model", "b.gguf"], "server decides"),
    (["hi", "--model", "a.gguf", "--model", "b.gguf", "-o", "out.xlsx"], ".md, .csv or .json"),
    (["hi", "--model", "a.gguf", "--api-key-env", "K", "--model", "b.gguf"], "applies to an --endpoint"),
    (["hi", "--api-key-env", "K", "--model", "a.gguf", "--model", "b.gguf"], "name a target"),
    (["hi", "--endpoint", "http://x:1/v1", "--api-key-env", "NO_SUCH_VAR_HERE", "--model", "b.gguf"],
     "is not set"),
    (["", "--model", "a.gguf", "--model", "b.gguf"], "empty"),
])
def test_bad_arguments_are_one_line_exit_2(args, words):
    r = _compare(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0]


def test_cancel_stops_the_running_target_and_skips_the_rest(model_path):
    targets = [Target("model", str(model_path)), Target("model", str(model_path))]
    apply_set(targets[1], "threads=1")
    cancel = CancelToken()
    cmp = run_comparison(targets, ["Write a long story."],
                         GenerationSettings(max_tokens=400, temperature=0, ignore_eos=True), repeat=3,
                         warmup=False, on_progress=lambda *_: cancel.cancel(), cancel=cancel)
    assert cmp.cancelled
    assert len(cmp.rows[0].runs) == 1 and cmp.rows[0].error == "cancelled"
    assert cmp.rows[1].runs == [] and "cancelled" in cmp.rows[1].error


def test_a_prompt_too_long_for_one_targets_context_fails_that_row_only(model_path):
    long = "Tell me about lighthouses. " * 120
    r = _compare(long, "--model", str(model_path), "--set", "ctx=256", "--model", str(model_path),
                 "--set", "ctx=2048", "--max-tokens", "4", "--repeat", "1", "--no-warmup", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["runs"] == 0 and "context" in rows[0]["error"]
    assert rows[1]["runs"] == 1 and rows[1]["error"] is None


def test_every_target_failing_exits_1_and_an_export_into_a_missing_folder_keeps_the_comparison(
        model_path, tmp_path):
    r = _compare("Say hi.", "--model", "/nonexistent/a.gguf", "--endpoint", f"http://127.0.0.1:{free_port()}/v1",
                 "--repeat", "1", "--json")
    assert r.returncode == 1 and "every target failed" in r.stderr
    out = tmp_path / "no-such-folder" / "cmp.md"
    r = _compare("Say hi.", "--model", str(model_path), "--model", "/nonexistent/a.gguf", "--max-tokens", "4",
                 "--repeat", "1", "--json", "-o", str(out))
    assert r.returncode == 1 and not out.exists() and "Traceback" not in r.stderr
    assert "does not exist" in r.stderr and "the comparison is kept in" in r.stderr
    assert json.loads(r.stdout)["rows"][0]["runs"] == 1  # the finished comparison is still printed
    from app.compare import saved

    assert saved.listing(), "and kept for the Compare window"


@pytest.mark.parametrize("item", ["ubatch=2147483647", "batch=0", "ctx=99999999999", "threads=100000"])
def test_a_load_setting_past_what_llama_cpp_holds_is_refused_before_loading(item):
    r = _compare("hi", "--model", "a.gguf", "--set", item, "--model", "b.gguf")
    assert r.returncode == 2 and "must be between" in r.stderr and len(r.stderr.strip().splitlines()) == 1
