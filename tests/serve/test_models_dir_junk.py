"""`llamadesk serve --models-dir` on a folder with junk beside a model, for real: a server child
process, the official openai client. A file that is no model costs only itself: it is named with
its reason at startup and in GET /models, left out of /v1/models, and a request for it is told
why; the model beside it answers. A folder of nothing but junk is refused in one line."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.errors import ModelFileError
from app.engine.gguf import read_header
from tests.remote.servers import Process, free_port
from tests.serve.harness import error, request_line, serve_env, upload

RANDOM = "random-bytes.gguf"
TRUNCATED = "truncated-Q4_K_M.gguf"
EMPTY = "empty.gguf"


def _copy(src: Path, dst: Path) -> None:
    """A copy of the model that costs no disk where the folder allows a hard link."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _junk(d: Path, model_path: Path) -> dict[str, str]:
    """The junk files, each with the reason the server must give for it."""
    (d / RANDOM).write_bytes(random.Random(5).randbytes(64 << 10))
    with open(model_path, "rb") as f:
        (d / TRUNCATED).write_bytes(f.read(16 << 20))  # the header whole, the tensor data cut short
    (d / EMPTY).write_bytes(b"")
    with pytest.raises(ModelFileError) as cut:  # how many bytes its tensors need, as the reader says
        read_header(d / TRUNCATED)
    assert cut.value.reason.startswith("truncated GGUF: tensor data needs ")
    return {RANDOM: "not a GGUF file (wrong magic bytes)", TRUNCATED: cut.value.reason,
            EMPTY: "is empty (0 bytes)"}


def serve_dir(d: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app", "serve", "--models-dir", str(d), "--ctx", "2048", "--threads", "2",
            "--parallel", "2", *extra]


@pytest.fixture(scope="module")
def folder(model_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("models-dir")
    _copy(model_path, d / model_path.name)
    return d, _junk(d, model_path)


@pytest.fixture(scope="module")
def srv(folder, tmp_path_factory):
    d, _ = folder
    home = tmp_path_factory.mktemp("junk-home")
    port = free_port()
    s = Process([*serve_dir(d), "--port", str(port)], port, "/health", serve_env(home))
    yield s
    s.stop()


def test_the_model_answers_and_the_junk_is_named_at_startup(srv, folder, model_path):
    d, reasons = folder
    log = srv.log.read_text()
    assert f"serving 1 model on {srv.base}/v1" in log and model_path.name in log
    for name, why in reasons.items():
        assert f"llamadesk: not serving {d / name}: {why} (listed in GET /models with the reason)\n" in log
    assert "Traceback" not in log
    with openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == [model_path.name]  # what a client may pick
        r = client.chat.completions.create(model=model_path.name, max_tokens=3, temperature=0,
                                           messages=[{"role": "user", "content": "Name a colour."}])
        assert r.model == model_path.name and r.choices[0].message.content
        with pytest.raises(openai.NotFoundError) as e:
            client.chat.completions.create(model=RANDOM, max_tokens=3,
                                           messages=[{"role": "user", "content": "Hi"}])
        assert e.value.code == "model_unusable"
        assert (f"the model '{RANDOM}' cannot be served: not a GGUF file (wrong magic bytes) (this server "
                f"has '{model_path.name}')") in str(e.value)


def test_get_models_lists_each_junk_file_as_failed_with_its_reason(srv, folder, model_path):
    d, reasons = folder
    listed = {m["id"]: m for m in httpx.get(srv.base + "/models", timeout=30).json()["data"]}
    assert set(listed) == {model_path.name, *reasons}
    assert listed[model_path.name]["status"]["value"] in ("loaded", "unloaded")
    assert "failed" not in listed[model_path.name]["status"]
    for name, why in reasons.items():
        assert listed[name]["status"] == {"value": "unloaded", "failed": True, "error": why}
        assert listed[name]["path"] == str(d / name) and listed[name]["meta"]["memory_needed"] is None
    body = error(httpx.get(srv.base + f"/v1/models/{TRUNCATED}", timeout=30), 404)
    assert body["code"] == "model_unusable" and reasons[TRUNCATED] in body["message"]


def test_junk_is_never_loaded_and_a_batch_naming_it_is_refused(srv, folder):
    _, reasons = folder
    body = error(httpx.post(srv.base + "/models/load", json={"model": EMPTY}, timeout=30), 404)
    assert body["code"] == "model_unusable" and body["message"].startswith(
        f"the model '{EMPTY}' cannot be served: is empty (0 bytes)")
    stem = TRUNCATED.removesuffix(".gguf")  # llama-server's name for a --models-dir file
    body = error(httpx.post(srv.base + "/v1/completions", timeout=30,
                            json={"model": stem, "prompt": "Hi", "max_tokens": 2}), 404)
    assert reasons[TRUNCATED] in body["message"]
    f = upload(srv.base, (request_line("a", RANDOM) + "\n").encode())
    r = httpx.post(srv.base + "/v1/batches", timeout=30, json={
        "input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"})
    assert f"line 1: the model '{RANDOM}' cannot be served" in error(r, 400)["message"]
    listed = httpx.get(srv.base + "/models", timeout=30).json()["data"]
    assert all(m["status"]["value"] == "unloaded" for m in listed if m["id"] in reasons)


def test_a_folder_of_nothing_but_junk_is_refused_in_one_line(model_path, tmp_path):
    d = tmp_path / "junk-only"
    d.mkdir()
    reasons = _junk(d, model_path)
    r = subprocess.run([*serve_dir(d), "--port", str(free_port())], capture_output=True, text=True,
                       timeout=120, env=serve_env(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    why = "; ".join(f"{name} ({reasons[name]})" for name in sorted(reasons))
    assert r.stderr.strip().splitlines() == \
        [f"llamadesk: error: --models-dir {d} holds no model that can be served: {why}"]


def test_a_junk_file_named_with_model_still_stops_the_server(model_path, tmp_path):
    """--model is the user's own choice of a file: it must be a model, as with one model."""
    d = tmp_path / "one-good"
    d.mkdir()
    _copy(model_path, d / model_path.name)
    (tmp_path / RANDOM).write_bytes(random.Random(6).randbytes(4096))
    r = subprocess.run([*serve_dir(d), "--model", str(tmp_path / RANDOM), "--port", str(free_port())],
                       capture_output=True, text=True, timeout=120, env=serve_env(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == \
        [f"llamadesk: error: {tmp_path / RANDOM}: not a GGUF file (wrong magic bytes)"]
