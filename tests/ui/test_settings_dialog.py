"""The settings dialog's prompt section: DRY, the preamble (shown as sent) and the prompt cache."""

from __future__ import annotations

from app.config import AppConfig
from app.engine.prompt import DEFAULT_FRAMING, EXAMPLES
from app.ui.settings.dialog import SettingsDialog
from tests.ui.conftest import ask, small_config


def test_dry_and_preamble_round_trip_and_the_preamble_is_shown_as_sent(qtbot):
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    shown = dlg.preamble_text.toPlainText()
    assert shown.startswith(DEFAULT_FRAMING) and EXAMPLES[0][1] in shown
    assert dlg.preamble.isChecked() and dlg.dry.text() == "off"
    dlg.dry.setValue(0.8)
    dlg.preamble.setChecked(False)
    assert not dlg.preamble_text.isEnabled()
    got = dlg.value()
    assert (got.dry_multiplier, got.preamble) == (0.8, False)
    assert (got.generation().dry_multiplier, got.generation().preamble) == (0.8, False)


def test_the_prompt_cache_size_is_shown_and_clear_empties_it(qtbot, make_window):
    win = make_window(small_config(max_tokens=2))
    ask(qtbot, win, "Hi")  # the first chat saves its preamble's state
    dlg = SettingsDialog(win.config, win)
    qtbot.addWidget(dlg)
    assert "in 1 saved prefix " in dlg.cache_label.text() and dlg.clear_cache_button.isEnabled()
    dlg.clear_cache_button.click()
    assert dlg.cache_label.text().startswith("0.0 MB in 0 saved prefixes")
    assert not dlg.clear_cache_button.isEnabled()
