"""Light, Dark and System from the settings, and what must stay readable in dark."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QLabel

from app.chat.conversation import LiveMessage
from app.engine import backend
from app.ui import theme
from app.ui.chat.meters import track
from app.ui.settings.dialog import HINTS, SettingsDialog
from tests.ui.conftest import small_config


def contrast(a: QColor, b: QColor) -> float:
    """WCAG's contrast ratio of two colours."""
    def lum(c: QColor) -> float:
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
              for v in (c.redF(), c.greenF(), c.blueF())]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture
def back_to_system():
    yield
    theme.apply("system")


def test_dark_from_the_settings_recolours_the_window_and_stays_readable(qtbot, make_window, back_to_system):
    win = make_window(small_config())
    win.flow.new_chat(win.flow.conversation.__class__(messages=[
        LiveMessage("user", "Hi"), LiveMessage("assistant", "```python\nprint(1)\n```\n")]))
    started = QApplication.palette().color(QPalette.ColorRole.Window)
    win.apply_settings(replace(win.config, theme="dark"))
    assert theme.current() == "dark" and win.config.theme == "dark"
    qtbot.waitUntil(lambda: win.view.renderer.theme.dark, timeout=2_000)  # Qt posts the palette change
    pal = QApplication.palette()
    assert pal.color(QPalette.ColorRole.Window).lightness() < 80
    rt = win.view.renderer.theme
    assert rt.dark and contrast(QColor(rt.link), QColor(rt.code_bg)) >= 4.5  # the Copy link reads
    html = win.view.document().toHtml()
    assert rt.code_bg in html and rt.link in html  # the transcript was drawn again in dark colours
    bar = win.gauges.kv_bar.palette()
    assert contrast(track(bar), bar.color(QPalette.ColorRole.Window)) >= 1.15  # the empty part shows
    qtbot.waitUntil(lambda: win.gauges.plot.backgroundBrush().color().lightness() < 80, timeout=2_000)
    win.apply_settings(replace(win.config, theme="system"))
    assert QApplication.palette().color(QPalette.ColorRole.Window) == started


def test_a_dark_desktop_palette_with_qts_dark_blue_link_still_gives_a_readable_copy_link():
    from app.ui.chat.message_format import theme_from

    pal = theme.dark_palette()
    pal.setColor(QPalette.ColorRole.Link, QColor("#0000ff"))  # Qt's default, on a desktop's dark theme
    rt = theme_from(pal)
    assert contrast(QColor(rt.link), QColor(rt.code_bg)) >= 4.5


def test_every_setting_is_explained_and_gpu_layers_is_off_on_a_cpu_build(qtbot):
    from app.config import AppConfig

    dlg = SettingsDialog(AppConfig(theme="dark"))
    qtbot.addWidget(dlg)
    assert dlg.theme.currentText() == "Dark" and dlg.value().theme == "dark"
    for name, widget in (("Temperature", dlg.temperature), ("Top-p", dlg.top_p), ("Top-k", dlg.top_k),
                         ("Min-p", dlg.min_p), ("Repeat penalty", dlg.repeat_penalty), ("Seed", dlg.seed),
                         ("Max tokens", dlg.max_tokens), ("Context length", dlg.n_ctx),
                         ("Threads", dlg.threads)):
        assert widget.toolTip() == HINTS[name][1], name
    if not backend.gpu_offload_supported():
        assert not dlg.gpu_layers.isEnabled()
        notes = [lab.text() for lab in dlg.gpu_layers.parentWidget().findChildren(QLabel)]
        assert any("CPU only" in t for t in notes)
    dlg.resize(dlg.sizeHint())
    assert dlg.sizeHint().height() <= 600  # fits a small screen
