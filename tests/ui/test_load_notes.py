"""The engine's one-line setup warnings reach the message bar, once per load, as `ask` prints them."""

from __future__ import annotations

from app import paths
from tests.ui.conftest import small_config


def test_a_prompt_cache_that_cannot_work_is_said_once_per_load(qtbot, make_window):
    blocked = paths.cache_dir() / "prompt-cache"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("a file where the cache folder should be")
    win = make_window(small_config())
    assert win.loaded.notes and win.loaded.notes[0].startswith("the prompt cache is off:")
    assert win.bar.isVisible() and win.bar.level == "warning"
    assert win.bar.text().count("The prompt cache is off:") == 1
    win.bar.hide()
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.load_model(win.model_path)
    assert win.bar.text().count("The prompt cache is off:") == 1  # said again for the new load, once
