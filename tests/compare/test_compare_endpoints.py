"""`llamadesk compare` on endpoints that need something from the user: each failure names
compare's own options (which follow the --endpoint they apply to), while `ask` meeting the same
server names its own; and a setting only its neighbours make wrong is refused before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.remote.servers import FaultServer, answer

TWO_MODELS = json.dumps({"object": "list", "data": [{"id": "small"}, {"id": "large"}]})
LOCKED = json.dumps({"error": {"message": "Invalid API Key"}})


@pytest.fixture
def two_models():
    srv = FaultServer(lambda h: answer(h, 200, TWO_MODELS) if h.path.endswith("/models")
                      else answer(h, 404, "{}"))
    yield srv.base + "/v1"
    srv.stop()


@pytest.fixture
def locked():
    srv = FaultServer(lambda h: answer(h, 401, LOCKED))
    yield srv.base + "/v1"
    srv.stop()


def _run(*args: str):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120)


def test_compare_names_its_own_endpoint_options_and_ask_its_own(two_models, locked):
    r = _run("compare", "hi", "--endpoint", two_models, "--endpoint", locked, "--repeat", "1", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows[0]["error"] == ("the server has 2 models (small, large); pick one with --remote-model NAME "
                                "after its --endpoint")
    assert rows[1]["error"] == (f"{locked}: the server wants an API key (HTTP 401: Invalid API Key); "
                                "give one with --api-key-env VAR after its --endpoint")
    lines = r.stderr.strip().splitlines()
    assert f"llamadesk: {two_models}: the server has 2 models (small, large); pick one with --remote-model " \
           "NAME after its --endpoint" in lines
    assert any(line.endswith("give one with --api-key-env VAR after its --endpoint") for line in lines)

    asked = _run("ask", "--no-save", "--endpoint", two_models, "hi")
    assert asked.returncode == 2
    assert asked.stderr.strip() == ("llamadesk: error: the server has 2 models (small, large); pick one with "
                                    "--remote-model NAME")
    asked = _run("ask", "--no-save", "--endpoint", locked, "hi")
    assert asked.returncode == 1 and asked.stderr.strip().endswith("give one with --api-key-env VAR")


def test_the_option_compare_names_is_the_one_that_works(two_models):
    """Following the row's advice gets past the failure (to the next one: this server answers nothing)."""
    r = _run("compare", "hi", "--endpoint", two_models, "--remote-model", "large", "--endpoint", two_models,
             "--remote-model", "small", "--repeat", "1", "--no-warmup", "--json")
    rows = json.loads(r.stdout)["rows"]
    assert all("pick one" not in row["error"] and "HTTP 404" in row["error"] for row in rows), rows


@pytest.mark.parametrize("settings, words", [
    (["--set", "ubatch=4096"],
     "--set ubatch=4096 is more than the batch of 512 tokens of a.gguf [ubatch=4096]: "
     "give --set batch=4096 too, or a smaller ubatch"),
    (["--set", "batch=64", "--set", "ubatch=128"], "--set ubatch=128 is more than the batch of 64 tokens"),
    (["--set", "ubatch=99999"], "--set ubatch= must be between 1 and 8192, got 99999"),
])
def test_a_ubatch_that_cannot_run_as_given_is_a_usage_error_before_anything_loads(settings, words):
    r = _run("compare", "hi", "--model", "a.gguf", *settings, "--model", "b.gguf")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llamadesk: error: ") and words in lines[0], lines


def test_a_ubatch_within_its_batch_is_run_and_recorded(model_path):
    r = _run("compare", "hi", "--model", str(model_path), "--set", "batch=1024", "--set", "ubatch=1024",
             "--model", str(model_path), "--max-tokens", "2", "--repeat", "1", "--no-warmup", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    kept = [(row["settings"]["batch"], row["settings"]["ubatch"]) for row in rows]
    assert kept == [(1024, 1024), (512, 256)]
    assert all(row["runs"] == 1 for row in rows)
