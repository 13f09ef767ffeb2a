"""Settings that survive a restart, errors that leave the window usable, prompt exit."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.config import load_config
from tests.ui.conftest import ask, decode_to_max_tokens, small_config


def test_streaming_toggle_and_settings_persist_across_a_restart(qtbot, make_window):
    win = make_window(small_config(streaming=True))
    assert win.model_bar.streaming.isChecked()
    qtbot.keyClick(win, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert not win.model_bar.streaming.isChecked()
    cfg = small_config(streaming=False, temperature=0.3, top_k=7, max_tokens=33, seed=42)
    assert win.apply_settings(cfg) == []  # sampling only: no reload needed
    assert not win.bar.isVisible() or "reload" not in win.bar.text().lower()
    win.close()

    again = make_window()  # a new window instance reads the same settings file
    assert not again.model_bar.streaming.isChecked() and not again.config.streaming
    c = again.config
    assert (c.temperature, c.top_k, c.max_tokens, c.seed) == (0.3, 7, 33, 42)
    assert again.config.generation().max_tokens == 33
    msg = ask(qtbot, again, "Say hi.")
    assert msg.stats.decode_tokens <= 33


def test_load_time_settings_say_a_reload_is_needed_and_reload(qtbot, make_window):
    win = make_window(small_config(n_ctx=1024))
    reload = win.apply_settings(small_config(n_ctx=2048))
    assert reload == ["n_ctx"]
    assert win.bar.isVisible() and "reloaded" in win.bar.text()
    assert load_config().n_ctx == 2048
    with qtbot.waitSignal(win.model_loaded, timeout=30_000) as blocker:
        win.bar.action.click()  # "Reload now"
    assert blocker.args[0].n_ctx >= 2048


def test_bad_model_path_shows_an_error_and_the_window_keeps_working(qtbot, make_window, tmp_path,
                                                                   model_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf at all")
    win = make_window(small_config(), model=str(bad), expect_fail=True)
    assert win.bar.isVisible() and "Could not load" in win.bar.text() and "broken.gguf" in win.bar.text()
    win.composer.set_text("typed before the model works")
    assert not win.flow.send()
    assert win.composer.text() == "typed before the model works"  # nothing typed is lost
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.load_model(str(model_path))
    msg = ask(qtbot, win, "Say hi.")
    assert msg.stats.decode_tokens > 0


def test_context_overflow_is_a_message_and_the_text_comes_back(qtbot, make_window):
    win = make_window(small_config(n_ctx=256, max_tokens=16))
    long_text = "word " * 400
    win.composer.set_text(long_text)
    with qtbot.waitSignal(win.flow.reply_failed, timeout=30_000):
        win.flow.send()
    assert "Context overflow" in win.bar.text()
    assert win.composer.text() == long_text
    assert win.flow.conversation.messages == [] and not win.flow.busy
    win.bar.close_button.click()
    assert not win.bar.isVisible()
    msg = ask(qtbot, win, "Say hi.")
    assert msg.stats.decode_tokens > 0


def test_closing_during_generation_exits_promptly(qtbot, make_window):
    win = make_window(small_config(max_tokens=2000, n_ctx=4096))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    win.composer.set_text("Tell me a very long story.")
    win.flow.send()
    qtbot.waitUntil(lambda: win.view.stream_paints > 2, timeout=30_000)
    assert win.bridge.engine_thread.isRunning() and win.flow.busy
    t0 = time.perf_counter()
    win.close()
    assert time.perf_counter() - t0 < 2.0
    assert win.bridge.engine_thread.isFinished()
    assert win.bridge.worker.engine is None  # model freed


def test_run_window_on_qasync_closes_mid_reply(qtbot, model_path):
    """The real entry point: qasync loop, window closed while decoding, returns 0."""
    from app.config import save_config
    from app.ui.main import run_window
    from app.ui.window import MainWindow

    save_config(small_config(max_tokens=2000, n_ctx=4096))
    state = {}

    def drive():
        win = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
        state["win"] = win

        def loaded(_info):
            win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
            win.composer.set_text("Tell me a very long story.")
            win.flow.send()

        def poll():
            if win.view.stream_paints > 2 and "t0" not in state:
                state["t0"] = time.perf_counter()
                win.close()
            elif "t0" not in state:
                QTimer.singleShot(20, poll)

        win.model_loaded.connect(loaded)
        QTimer.singleShot(20, poll)

    QTimer.singleShot(0, drive)
    rc = run_window(str(model_path))
    assert rc == 0
    assert time.perf_counter() - state["t0"] < 2.0
    assert state["win"].bridge.engine_thread.isFinished()


def test_a_partly_invalid_settings_file_is_kept_told_and_only_bad_values_reset(qtbot, make_window):
    import json

    from app.config import AppConfig, default_path, save_config

    save_config(small_config(temperature=0.3, seed=42))
    data = json.loads(default_path().read_text())
    data["n_ctx"] = 100  # out of range
    default_path().write_text(json.dumps(data))
    win = make_window()  # loads the model and then saves its settings, as on every start
    assert win.bar.isVisible() and win.bar.level == "warning"
    text = win.bar.text()
    assert "n_ctx 100 reset to 4096" in text and "old file is kept" in text and "\n" not in text
    assert (win.config.temperature, win.config.seed, win.config.n_ctx) == (0.3, 42, AppConfig().n_ctx)
    copies = [p for p in default_path().parent.iterdir() if ".unusable-" in p.name]
    assert len(copies) == 1 and json.loads(copies[0].read_text())["n_ctx"] == 100
    saved = load_config()
    assert (saved.temperature, saved.seed) == (0.3, 42)  # the save kept the good values
