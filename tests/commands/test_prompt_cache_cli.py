"""The prompt cache across processes: one `ask` saves the shared prefix, the next loads it."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

from app.paths import prompt_cache_dir


def _ask(model_path) -> dict:
    r = subprocess.run([sys.executable, "-m", "app", "ask", "Hi", "--json", "--no-save", "--temperature", "0",
                        "--max-tokens", "4", "--model", str(model_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert isinstance(out["text"], str) and out["stats"]["stop_reason"] in ("stop", "length")
    return out["stats"]


def _entry():
    states = sorted(prompt_cache_dir().glob("*.kv"))
    assert len(states) == 1, states
    return states[0], states[0].with_suffix(".json")


def _valid(state, side) -> bool:
    meta = json.loads(side.read_text())
    return meta["state_crc32"] == f"{zlib.crc32(state.read_bytes()):08x}"


def test_state_saved_by_one_process_is_used_by_the_next_and_a_damaged_one_rebuilt(model_path):
    first = _ask(model_path)
    assert first["cached_tokens"] == first["cached_disk_tokens"] == 0
    state, side = _entry()
    assert _valid(state, side)

    second = _ask(model_path)
    assert second["cached_tokens"] > 0 and second["cached_disk_tokens"] == second["cached_tokens"]
    assert second["prefill_tokens"] == second["prompt_tokens"] - second["cached_tokens"]

    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 3])  # truncated, as a full disk or a crash would leave it
    third = _ask(model_path)
    assert third["cached_disk_tokens"] == 0 and third["cached_tokens"] == 0
    assert third["prefill_tokens"] == third["prompt_tokens"]
    assert _entry() == (state, side) and _valid(state, side), "the damaged entry was not rebuilt"

    fourth = _ask(model_path)
    assert fourth["cached_disk_tokens"] == second["cached_disk_tokens"]
