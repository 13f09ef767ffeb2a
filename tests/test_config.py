"""The window's settings file: every usable value kept, nothing unusable lost or hidden."""

from __future__ import annotations

import json

from app.config import AppConfig, default_path, load_config, read_config, save_config


def test_settings_file_round_trips():
    cfg = AppConfig(streaming=False, temperature=0.2, seed=7, n_ctx=2048)
    save_config(cfg)
    got = read_config()
    assert got.config == cfg and got.problems == [] and got.message() is None
    assert list(default_path().parent.iterdir()) == [default_path()]  # no copy of a good file
    assert AppConfig(n_ctx=4096).needs_reload(AppConfig(n_ctx=8192, temperature=0)) == ["n_ctx"]


def test_each_bad_value_is_reset_alone_named_and_the_file_kept():
    save_config(AppConfig(streaming=False, temperature=0.2, seed=7, n_ctx=2048))
    data = json.loads(default_path().read_text())
    data.update(n_ctx=100, temperature="hot", top_k=True, top_p=float("nan"), unknown=1)
    original = json.dumps(data)
    default_path().write_text(original)
    got = read_config()
    defaults = AppConfig()
    assert (got.config.n_ctx, got.config.temperature, got.config.top_k) == \
           (defaults.n_ctx, defaults.temperature, defaults.top_k)
    assert got.config.top_p == defaults.top_p
    assert (got.config.seed, got.config.streaming) == (7, False)  # the good values are kept
    assert [p.split()[0] for p in got.problems] == ["n_ctx", "temperature", "top_p", "top_k"]
    assert "at least 256" in got.problems[0]
    assert got.kept_copy is not None and got.kept_copy.read_text() == original
    msg = got.message()
    assert "\n" not in msg and "n_ctx 100 reset to 4096" in msg and str(got.kept_copy) in msg


def test_an_unreadable_json_file_is_copied_aside_before_defaults_are_used():
    default_path().parent.mkdir(parents=True, exist_ok=True)
    default_path().write_bytes(b'{"temperature": 0.3, "n_ct')  # cut off mid-write
    got = read_config()
    assert got.config == AppConfig()
    assert got.kept_copy.read_bytes() == b'{"temperature": 0.3, "n_ct'
    assert "not valid JSON" in got.message() and str(default_path()) in got.message()
    default_path().write_text("[1, 2]")
    assert "does not hold a settings object" in read_config().message()
    assert load_config() == AppConfig()


def test_saved_servers_round_trip_and_a_bad_one_is_dropped_alone_and_named():
    from app.config import SavedEndpoint

    cfg = AppConfig()
    cfg.remember_endpoint(SavedEndpoint("http://gpu-box:8000/v1", "llama-3.1-8b", "chat", "VLLM_KEY"))
    cfg.remember_endpoint(SavedEndpoint("http://127.0.0.1:11434/v1", "llama3.2"))
    save_config(cfg)
    got = read_config()
    assert got.problems == [] and [e.base_url for e in got.config.saved_endpoints()] == [
        "http://127.0.0.1:11434/v1", "http://gpu-box:8000/v1"]
    assert got.config.active_endpoint == "http://127.0.0.1:11434/v1"
    data = json.loads(default_path().read_text())
    assert "key" not in json.dumps(data["endpoints"]).replace("api_key_env", "")
    data["endpoints"].append({"base_url": "ftp://nope", "model": "x"})
    data["endpoints"].append({"base_url": "http://ok:1/v1", "prompt_format": "poetry"})
    default_path().write_text(json.dumps(data))
    again = read_config()
    assert len(again.config.saved_endpoints()) == 2  # the good ones kept
    assert len(again.problems) == 2 and all(p.startswith("saved endpoint") for p in again.problems)
    assert "scheme must be http or https" in again.problems[0] and "prompt_format" in again.problems[1]


def test_the_theme_is_kept_and_an_unknown_one_is_reset_alone():
    save_config(AppConfig(theme="dark", seed=3))
    assert read_config().config.theme == "dark"
    data = json.loads(default_path().read_text())
    data.update(theme="purple")
    default_path().write_text(json.dumps(data))
    got = read_config()
    assert got.config.theme == "system" and got.config.seed == 3
    assert got.problems and got.problems[0].startswith("theme") and "light" in got.problems[0]
    data.update(theme=7)
    default_path().write_text(json.dumps(data))
    assert read_config().config.theme == "system"
