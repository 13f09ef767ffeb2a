"""A first launch on the bundled model: the panel says what that model is and offers
instruction-tuned ones with sizes and fit labels (read from the local Hub), once; the chat
template bar says what it means, once, not on every launch."""

from __future__ import annotations

import socket

from app.config import load_config, save_config
from app.engine.gguf import human_size
from app.engine.prompt import TRANSCRIPT_NOTICE
from app.ui.load_notes import EXPLAINED
from app.ui.models import first_launch
from app.ui.models.first_launch import Suggestion
from tests.hub import conftest as hub_fixtures
from tests.hub.conftest import GEMMA, TINY
from tests.ui.conftest import small_config

mirror, quantized_q8, hub = hub_fixtures.mirror, hub_fixtures.quantized_q8, hub_fixtures.hub

SUGGESTED = (Suggestion("Gemma 3 270M, Q8_0", f"{GEMMA}:Q8_0", 300_000_000, "a requantized copy"),
             Suggestion("Tiny", f"{TINY}:Q2_K", 7_000_000, "random bytes"),
             Suggestion("Missing", "nobody/missing-GGUF:Q4_K_M", 1_000_000_000, "not on this Hub"))


def _window(qtbot):
    from app.ui.window import MainWindow

    win = MainWindow()  # the bundled model, the settings of the test's own config folder
    qtbot.addWidget(win)
    win.show()
    return win


def test_the_first_launch_panel_appears_once_and_the_template_bar_explains_once(qtbot, hub, monkeypatch):
    monkeypatch.setattr(first_launch, "SUGGESTED", SUGGESTED)
    save_config(small_config())
    win = _window(qtbot)
    panel = win.models.panel
    assert panel is not None and panel.isVisible()
    text = panel.text()
    assert "bundled model, Gemma 3 270M" in text and "<i>base</i> model" in text
    assert len(panel.buttons) == 3 and 'href="models:"' in text
    assert "about 300.0 MB" in text and text.count("checking the fit…") <= 3
    assert load_config().first_launch_done  # remembered the moment it is shown
    qtbot.waitUntil(lambda: len(panel.checked) == 3, timeout=60_000)
    text = panel.text()
    q8 = hub.repos[GEMMA].file("gemma-3-270m-Q8_0.gguf")
    assert f"Q8_0 · {human_size(q8.size)}" in text  # the Hub's size replaced the catalogue's
    assert panel.checked[f"{GEMMA}:Q8_0"].fit.label == "fits" and "fits · needs " in text
    assert "about 1.0 GB" in text and "fit not checked: no such repository on " in text
    with qtbot.waitSignal(win.models.service.done, timeout=60_000):
        panel.buttons[1].click()  # Download: into the Models window
    assert win.models.models_window.isVisible()
    assert win.models.models_window.job.spec == f"{TINY}:Q2_K"
    qtbot.waitUntil(lambda: win.loaded is not None, timeout=120_000)  # the default model, assembled
    assert win.loaded.notice == TRANSCRIPT_NOTICE
    assert win.bar.isVisible() and win.bar.text() == EXPLAINED[TRANSCRIPT_NOTICE]
    assert win.bar.action.text() == "Get models…"
    assert TRANSCRIPT_NOTICE in load_config().notices_seen
    win.close()

    again = _window(qtbot)
    assert again.models.panel is None  # once
    qtbot.waitUntil(lambda: again.loaded is not None, timeout=60_000)
    assert not again.bar.isVisible()  # the template bar was said on the first launch
    assert again.models.get_action.text() == "Get models…" and again.menuBar().actions()[0].text() == "&Model"
    again.close()


def test_offline_the_panel_says_once_that_the_fit_was_not_checked(qtbot, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on: refused at once, as offline
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    save_config(small_config())
    win = _window(qtbot)
    panel = win.models.panel
    qtbot.waitUntil(lambda: len(panel.checked) == len(first_launch.SUGGESTED), timeout=60_000)
    said = panel.text().splitlines()
    assert said[1:5] == [f"{s.title} · Q4_K_M · about {human_size(s.about)}"  # each its size alone
                         for s in first_launch.SUGGESTED]
    assert panel.unreachable.isVisible()
    why = "cannot connect (is the endpoint right, and the network up?)"
    assert panel.unreachable.text() == f"Fit not checked: the Hub cannot be reached ({why})"
    assert panel.unreachable.toolTip() == f"{url}: {why}"  # the endpoint it tried
    assert panel.text().count("Fit not checked") == 1
    assert panel.lines[-1].y() < panel.unreachable.y() < panel.footer.y()  # under the offers
    qtbot.waitUntil(lambda: win.loaded is not None, timeout=120_000)
    win.close()
