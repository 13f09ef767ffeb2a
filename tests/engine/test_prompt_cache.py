"""The prompt cache on disk: a saved prefix is used by another engine, a bad one is rebuilt."""

from __future__ import annotations

import json
import logging
import os
import zlib

import pytest

from app import paths
from app.chat.live_gauges import LiveGauges
from app.chat.local_engine import LocalChatEngine
from app.engine.events import PrefillStarted
from app.engine.loader import LoadOptions
from app.engine.prompt_cache import PromptCache, cache_usage, clear_cache
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats

SHORT = GenerationSettings(max_tokens=2, temperature=0)


def _entry(engine, system=None):
    prefix = engine.shared_prefix(system)
    assert prefix and len(prefix) >= 32
    return prefix, *engine.decoder.prompt_cache.entry_paths(prefix)


def _fresh_reply(engine, text="Hi", system=None):
    engine.decoder.reset()  # nothing in memory: only the disk can help
    return engine.reply([], text, SHORT, system=system).stats


def test_prefix_saved_by_one_engine_is_loaded_by_another(engine, model_path):
    prefix, state, side = _entry(engine)
    first = _fresh_reply(engine)
    assert first.cached_tokens == first.cached_disk_tokens == 0
    assert first.prefill_tokens == first.prompt_tokens
    assert state.is_file() and side.is_file()
    other = LocalChatEngine.open(model_path, LoadOptions(n_ctx=2048))
    try:
        s = other.reply([], "What is rain?", SHORT).stats
        assert s.cached_disk_tokens == s.cached_tokens == len(prefix) > 0
        assert s.prefill_tokens == s.prompt_tokens - len(prefix)
        assert s.stop_reason in ("stop", "length")
        assert other.decoder.tokens[:len(prefix)] == prefix
        assert "from disk" in s.summary()
        # The next turn finds the prefix in memory: nothing more is read from disk.
        again = other.reply([], "What is snow?", SHORT).stats
        assert again.cached_tokens >= len(prefix) and again.cached_disk_tokens == 0
    finally:
        other.close()


def test_system_prompt_gets_its_own_entry(engine):
    system = "You are a patient tutor who explains things to children in short, simple sentences."
    prefix, state, _ = _entry(engine, system)
    assert prefix != engine.shared_prefix(None)
    _fresh_reply(engine, system=system)
    assert state.is_file()
    s = _fresh_reply(engine, "Why is grass green?", system=system)
    assert s.cached_disk_tokens == len(prefix)


def _valid(state, side) -> bool:
    meta = json.loads(side.read_text())
    return meta["state_crc32"] == f"{zlib.crc32(state.read_bytes()):08x}"


def _resign(side, state):
    """Make the sidecar vouch for whatever the state file now holds."""
    meta = json.loads(side.read_text())
    meta["state_bytes"] = state.stat().st_size
    meta["state_crc32"] = f"{zlib.crc32(state.read_bytes()):08x}"
    side.write_text(json.dumps(meta))


def _damage(how, engine, state, side):
    if how == "truncated":
        data = state.read_bytes()
        state.write_bytes(data[: len(data) // 2])
    elif how == "changed":  # same size, other bytes in the middle of the tensors
        data = bytearray(state.read_bytes())
        mid = len(data) // 2
        data[mid:mid + 64] = bytes(255 - b for b in data[mid:mid + 64])
        state.write_bytes(bytes(data))
    elif how == "garbage":  # signed, so llama.cpp itself must refuse it
        state.write_bytes(os.urandom(state.stat().st_size))
        _resign(side, state)
    elif how == "other_model":
        meta = json.loads(side.read_text())
        meta["key"]["model_sha256"] = "0" * 64
        side.write_text(json.dumps(meta))
    elif how == "no_sidecar":
        side.unlink()
    elif how == "other_tokens":  # a real state of another prefix, signed: the tokens must tell
        system = "You answer every question with one word and nothing else, ever, no matter what."
        _fresh_reply(engine, system=system)
        _, other_state, _ = _entry(engine, system)
        state.write_bytes(other_state.read_bytes())
        _resign(side, state)


BAD = ["truncated", "changed", "garbage", "other_model", "no_sidecar", "other_tokens"]


@pytest.mark.parametrize("how", BAD)
def test_bad_entry_is_ignored_then_rebuilt(engine, how):
    prefix, state, side = _entry(engine)
    _fresh_reply(engine)
    _damage(how, engine, state, side)
    s = _fresh_reply(engine, "Hello there")
    assert s.cached_disk_tokens == 0 and s.cached_tokens == 0
    assert s.prefill_tokens == s.prompt_tokens and s.stop_reason in ("stop", "length")
    assert _valid(state, side), "the entry was not rebuilt"
    again = _fresh_reply(engine, "Hello there")
    assert again.cached_disk_tokens == len(prefix)


def _save_prompt(engine, cache: PromptCache, text: str) -> list[int]:
    """Evaluate `text` alone and save exactly it (one sampled token is never evaluated)."""
    dec = engine.decoder
    dec.reset()
    tokens = dec.tokenize(text)
    dec.generate(tokens, GenerationSettings(max_tokens=1, temperature=0))
    assert dec.tokens == tokens
    assert cache.save(dec.ctx, tokens)
    return tokens


LRU_TEXTS = [f"Note {i}: the lighthouse on the northern cape was painted in red and white stripes "
             f"so that ships could see it by day; this is note number {i}." for i in range(3)]


def test_least_recently_used_entry_goes_first(engine, tmp_path):
    probe = PromptCache(engine.model, folder=tmp_path / "probe")
    _save_prompt(engine, probe, LRU_TEXTS[0])
    one_entry, _ = cache_usage(tmp_path / "probe")
    cache = PromptCache(engine.model, max_bytes=int(one_entry * 2.5), folder=tmp_path / "lru")
    a, b = (_save_prompt(engine, cache, t) for t in LRU_TEXTS[:2])
    found = cache.lookup(a)
    assert found is not None and cache.restore(engine.decoder.ctx, found, a)  # a is used: b is older
    engine.decoder.reset()
    c = _save_prompt(engine, cache, LRU_TEXTS[2])
    assert cache.lookup(b) is None
    assert cache.lookup(a) is not None and cache.lookup(c) is not None
    assert cache_usage(tmp_path / "lru")[1] == 4
    engine.decoder.reset()


def test_usage_and_clear(engine):
    assert cache_usage() == (0, 0)
    _fresh_reply(engine)
    size, files = cache_usage()
    assert files == 2 and size > 0
    assert clear_cache() == 2
    assert cache_usage() == (0, 0)
    s = _fresh_reply(engine)
    assert s.cached_disk_tokens == 0 and cache_usage()[1] == 2


def test_failed_save_is_logged_once_and_replies_go_on(engine, monkeypatch, caplog):
    blocked = paths.cache_dir() / "prompt-cache"
    blocked.write_text("not a folder")  # the cache folder cannot be made
    monkeypatch.setattr(engine.decoder, "prompt_cache", PromptCache(engine.model))
    with caplog.at_level(logging.INFO, logger="llamadesk.prompt_cache"):
        stats = [_fresh_reply(engine, t) for t in ("Hi", "Hello")]
    assert all(s.stop_reason in ("stop", "length") and s.cached_disk_tokens == 0 for s in stats)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "could not save" in warnings[0].getMessage()


def test_disk_cache_can_be_turned_off(engine, monkeypatch):
    off = LocalChatEngine(engine.model, prompt_cache=False)
    off.decoder.close()
    assert off.decoder.prompt_cache is None
    monkeypatch.setattr(engine.decoder, "prompt_cache", None)
    s = _fresh_reply(engine)
    assert s.cached_disk_tokens == 0 and cache_usage() == (0, 0)


def test_short_prefix_is_not_cached(engine):
    assert engine.shared_prefix(None, preamble=False) is None


def test_stats_records_and_gauges_carry_the_disk_count():
    base = dict(ttft_s=0.1, prefill_tokens=5, cached_tokens=130, prefill_s=0.01, prefill_tok_s=500.0,
                decode_tokens=4, decode_s=0.1, decode_tok_s=40.0, total_s=0.2, kv_used=139, n_ctx=2048,
                stop_reason="stop")
    old = ReplyStats.from_json({**base, "some_future_field": 1})  # a record from before (or after)
    assert old.cached_disk_tokens == 0 and "disk" not in old.summary()
    new = ReplyStats.from_json({**base, "cached_disk_tokens": 130})
    assert new.to_json()["cached_disk_tokens"] == 130 and "cached 130 (130 from disk)" in new.summary()
    g = LiveGauges()
    g.start(0.0, 4, 2048)
    g.feed(PrefillStarted(135, 130, 5, 2048, 130), 0.01)
    assert g.snapshot(0.02).kv_cached_disk == 130 and g.snapshot(0.02).kv_cached == 130


def test_a_fifo_in_place_of_a_sidecar_or_the_hash_memo_is_passed_by_not_waited_on(engine, model_path):
    """A hostile local program's FIFO would block a plain open() until someone writes to it."""
    from app.engine.prompt_cache import HASHES_FILE, model_sha256

    prefix, state, side = _entry(engine)
    for f in (state, side):
        f.unlink(missing_ok=True)
    os.mkfifo(side)
    memo = paths.cache_dir() / HASHES_FILE
    memo.unlink(missing_ok=True)
    os.mkfifo(memo)
    try:
        assert engine.decoder.prompt_cache.lookup(prefix) is None
        assert len(model_sha256(model_path)) == 64  # hashed again; the FIFO is not a memo
        s = _fresh_reply(engine)
        assert s.cached_disk_tokens == 0 and s.stop_reason in ("stop", "length")
    finally:
        side.unlink(missing_ok=True)
        memo.unlink(missing_ok=True)


def test_a_cache_folder_that_cannot_be_made_turns_the_cache_off_with_one_line(model_path, monkeypatch,
                                                                              tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    eng = LocalChatEngine.open(model_path, LoadOptions(n_ctx=512))
    try:
        assert eng.decoder.prompt_cache is None
        (line,) = eng.notes
        assert line.startswith("the prompt cache is off:") and str(blocker) in line and "\n" not in line
        assert eng.reply([], "Hi", SHORT).stats.stop_reason in ("stop", "length")
    finally:
        eng.close()


def test_a_model_rewritten_in_place_with_its_size_and_mtime_kept_is_hashed_again(tmp_path):
    from app.engine.prompt_cache import model_sha256

    f = tmp_path / "model.gguf"
    f.write_bytes(b"GGUF" + b"a" * 4096)
    first = model_sha256(f)
    st = f.stat()
    with open(f, "r+b") as out:  # same inode, same size: another quantization copied over it, say
        out.seek(100)
        out.write(b"b")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (f.stat().st_size, f.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert model_sha256(f) != first
