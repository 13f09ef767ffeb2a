"""Speculative decoding as the window shows it: chosen in the settings, live in the gauges, in the
reply's footer after."""

from __future__ import annotations

from app.config import AppConfig
from app.ui.settings.dialog import SettingsDialog
from tests.engine.test_speculative import EDIT
from tests.ui.conftest import decode_to_max_tokens, small_config


def test_prompt_lookup_is_shown_live_in_the_gauges_and_after_in_the_footer(qtbot, make_window):
    win = make_window(small_config(max_tokens=96, speculative="ngram", repeat_penalty=1.0))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    g = win.gauges
    live = []
    win.composer.set_text(EDIT)
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: g.spec.isVisible() and "kept" in g.spec.text(), timeout=90_000)
        live.append(g.spec.text())
    msg = done.args[0]
    st = msg.stats
    assert live[0].startswith("prompt lookup: ") and "per check" in live[0], live
    assert st.spec_mode == "ngram" and st.draft_tokens >= st.draft_accepted > 0
    qtbot.waitUntil(lambda: g.spec.text().startswith(str(st.speculation())), timeout=5_000)
    assert str(st.speculation()) in st.summary()  # the footer's line is the record's


def test_a_plain_reply_shows_no_speculation_line(qtbot, make_window):
    win = make_window(small_config(max_tokens=8))
    win.composer.set_text("Hi")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as done:
        win.flow.send()
    assert done.args[0].stats.spec_mode is None
    assert not win.gauges.spec.isVisible() and win.gauges.spec.text() == ""


def test_the_draft_model_setting_needs_a_file_and_reloads_the_model(qtbot, tmp_path):
    cfg = AppConfig()
    dlg = SettingsDialog(cfg)
    qtbot.addWidget(dlg)
    assert not dlg.draft_model.isEnabled()
    dlg.speculative.setCurrentIndex(dlg.speculative.findData("draft"))
    assert dlg.draft_model.isEnabled()
    dlg._accept()
    assert dlg.result_config is None and "needs one: choose its file" in dlg.error.text()
    dlg.draft_model.setText(str(tmp_path / "draft.gguf"))
    dlg._accept()
    got = dlg.result_config
    assert got is not None and got.loaded_draft == str(tmp_path / "draft.gguf")
    assert cfg.needs_reload(got) == ["loaded_draft"]
    ngram = AppConfig(speculative="ngram", draft_model=str(tmp_path / "draft.gguf"))
    assert ngram.loaded_draft is None and cfg.needs_reload(ngram) == []  # no draft to load for it
    assert ngram.generation().speculative == "ngram"
