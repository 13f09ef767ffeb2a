"""The window's banners across theme switches, measured on what is painted, and the tool banner's
lifetime: it goes when the call it asks about is answered, and with the conversation it belongs to.

Contrast is read from the window's own pixels (a grab of the whole window, cut to the text), not
from palettes: the bug was a palette kept by a stylesheet's widget while the parent painted the
new theme's background behind it, which palette checks alone do not see."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QLabel, QWidget

from app.chat.tool_set import declared_tools, make_tool_set
from app.config import AppConfig
from app.engine.loader import LoadReport
from app.engine.prompt import TRANSCRIPT_NOTICE
from app.ui import theme
from app.ui.chat.tools_dialog import ToolsDialog
from app.ui.load_notes import EXPLAINED
from app.ui.model_bar import ModelBar
from app.ui.models.labels import FIT_COLOURS, fit_colour
from app.ui.remote.dialog import ConnectDialog
from app.ui.settings.dialog import SettingsDialog
from app.ui.widgets.levels import LevelLabel, contrast, level_colour
from app.ui.widgets.message_bar import MessageBar
from tests.ui.conftest import small_config

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "today's weather in a city",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                   "properties": {"city": {"type": "string", "maxLength": 12}}}}}]
TOOL_LINE = "The model called get_weather: give the result below and send it"


@pytest.fixture
def back_to_system():
    yield
    theme.apply("system")


def painted(widget: QWidget) -> tuple[QColor, QColor]:
    """(text, background) as the window paints them where `widget` is: the commonest colour is
    the background, the one furthest from it in contrast the text's."""
    top = widget.window()
    origin = widget.mapTo(top, QPoint(0, 0))
    img = top.grab(QRect(origin, widget.size())).toImage().convertToFormat(QImage.Format.Format_RGB32)
    w, h = img.width(), img.height()
    raw = np.frombuffer(img.constBits(), np.uint8, count=img.bytesPerLine() * h)
    px = raw.reshape(h, img.bytesPerLine() // 4, 4)[:, :w, :3].reshape(-1, 3)  # B, G, R
    colours, counts = np.unique(px, axis=0, return_counts=True)
    b, g, r = (int(v) for v in colours[counts.argmax()])
    bg = QColor(r, g, b)
    best = max((QColor(int(c[2]), int(c[1]), int(c[0])) for c in colours), key=lambda c: contrast(c, bg))
    return best, bg


def assert_readable(widget: QWidget, dark: bool, what: str) -> None:
    fg, bg = painted(widget)
    assert (bg.lightness() < 100) == dark, f"{what}: background {bg.name()} is not the {dark=} theme's"
    ratio = contrast(fg, bg)
    assert ratio >= 4.5, f"{what}: {fg.name()} on {bg.name()} is {ratio:.2f}:1"


def switch(qtbot, choice: str) -> None:
    theme.apply(choice)
    qtbot.wait(50)  # the palette change is posted; the repaint follows it


def test_every_banner_reads_after_each_theme_switch(qtbot, make_window, back_to_system):
    win = make_window(small_config(theme="light", max_tokens=32))
    assert win.bar.isVisible() and win.bar.text() == EXPLAINED[TRANSCRIPT_NOTICE]
    assert win.loaded.notice == TRANSCRIPT_NOTICE
    assert_readable(win.bar.label, dark=False, what="no-chat-template bar, light")
    switch(qtbot, "dark")
    assert_readable(win.bar.label, dark=True, what="no-chat-template bar, light to dark")

    win.tools.choose(make_tool_set([], declared_tools(WEATHER), "required"))
    win.composer.set_text("Weather in Paris?")
    with qtbot.waitSignal(win.flow.tool_waiting, timeout=120_000, check_params_cb=lambda calls: bool(calls)):
        win.flow.send()
    qtbot.waitUntil(lambda: not win.flow.busy, timeout=10_000)
    assert win.bar.text() == TOOL_LINE and win.tool_result.isVisible()
    banners = {"tool bar": win.bar.label, "tool result box": win.tool_result.title}
    for name, w in banners.items():
        assert_readable(w, dark=True, what=f"{name}, dark")
    switch(qtbot, "light")
    for name, w in banners.items():
        assert_readable(w, dark=False, what=f"{name}, dark to light")
    switch(qtbot, "dark")
    for name, w in banners.items():
        assert_readable(w, dark=True, what=f"{name}, light to dark again")

    win.model_bar.set_failed()  # the model bar's red "no model loaded"
    assert_readable(win.model_bar.status, dark=True, what="model bar error, dark")
    models = win.models.open()
    models.say("Could not reach the Hub", "error")
    qtbot.wait(50)
    assert_readable(models.status, dark=True, what="Models window error, dark")
    switch(qtbot, "light")
    assert_readable(win.model_bar.status, dark=False, what="model bar error, dark to light")
    assert_readable(models.status, dark=False, what="Models window error, dark to light")


@pytest.mark.parametrize("level", ["error", "warning", "info"])
def test_each_levels_bar_and_label_follow_light_and_dark(qtbot, back_to_system, level):
    host = QWidget()
    qtbot.addWidget(host)
    bar = MessageBar(host)
    label = LevelLabel("A line in its level's colour", host)
    status = ModelBar(host)
    bar.move(0, 0)
    label.move(0, 60)
    status.move(0, 100)
    host.resize(900, 160)
    bar.resize(880, 40)
    label.resize(400, 30)
    status.resize(880, 40)
    host.show()
    bar.show_message(f"A {level} that must read in every theme", level)
    label.set_level(level)
    status.set_failed()
    for choice in ("light", "dark", "light"):
        switch(qtbot, choice)
        dark = choice == "dark"
        assert not bar.styleSheet()  # painted from the palette, nothing baked in
        assert_readable(bar.label, dark, f"{level} bar, {choice}")
        assert_readable(label, dark, f"{level} label, {choice}")
        assert_readable(status.status, dark, f"model bar status, {choice}")
        _text, bg = painted(bar)
        assert contrast(bar.level_color(), bg) >= 3.0  # the border reads too (WCAG's 3:1 for marks)


def test_the_tool_banner_goes_when_its_call_is_answered_and_with_its_conversation(qtbot, make_window):
    win = make_window(small_config(max_tokens=32))
    win.tools.choose(make_tool_set([], declared_tools(WEATHER), "required"))
    win.composer.set_text("Weather in Paris?")
    with qtbot.waitSignal(win.flow.tool_waiting, timeout=120_000, check_params_cb=lambda calls: bool(calls)):
        win.flow.send()
    qtbot.waitUntil(lambda: not win.flow.busy, timeout=10_000)
    assert win.bar.text() == TOOL_LINE
    cid = win.flow.conversation.id

    win.new_chat()  # the conversation it belongs to is no longer shown
    assert win.bar.text() != TOOL_LINE and not win.tool_result.isVisible()
    win.history.open(cid)  # back to it: its call still waits, so the bar asks again
    assert win.tool_result.isVisible() and win.bar.text() == TOOL_LINE

    for _ in range(4):  # the model may call again; the turn's last reply is text
        win.tool_result.edit.setPlainText("Sunny, 24 °C")
        n = len(win.flow.conversation.messages)
        win.tool_result.send_button.click()
        assert win.bar.text() != TOOL_LINE  # answered: the line no longer holds
        qtbot.waitUntil(lambda n=n: not win.flow.busy and len(win.flow.conversation.messages) >= n + 2,
                        timeout=120_000)
        if not win.tool_result.isVisible():
            break
    last = win.flow.conversation.messages[-1]
    assert last.role == "assistant" and not last.tool_calls and last.content
    assert win.bar.text() != TOOL_LINE


@pytest.mark.parametrize("choice", ["light", "dark"])
def test_the_fit_labels_read_on_every_background_they_are_drawn_on(qtbot, back_to_system, choice):
    theme.apply(choice)
    pal = QWidget().palette()
    for label in FIT_COLOURS:
        colour = QColor(fit_colour(label, dark=choice == "dark"))
        for role in (QPalette.ColorRole.Base, QPalette.ColorRole.AlternateBase, QPalette.ColorRole.Window):
            assert contrast(colour, pal.color(role)) >= 4.5, (label, choice, role)


def assert_in_level(widget: QWidget, level: str, dark: bool, what: str) -> None:
    """Readable, and drawn in `level`'s colour for this theme, not in the plain text's."""
    assert_readable(widget, dark, what)
    fg, _bg = painted(widget)
    want = level_colour(level, widget.window().palette())
    off = abs(fg.red() - want.red()) + abs(fg.green() - want.green()) + abs(fg.blue() - want.blue())
    assert off <= 60, f"{what}: drawn in {fg.name()}, the {level} colour here is {want.name()}"


def test_the_dialogs_error_and_warning_lines_follow_each_theme_switch_while_open(qtbot, back_to_system):
    switch(qtbot, "light")
    fell_back = LoadReport(model_path="/m.gguf", backend="CUDA", gpu_offload_supported=True,
                           n_gpu_layers_requested=-1, layers_offloaded=0, layers_total=18,
                           fallback="CUDA ran out of memory: the model was loaded on the CPU", load_s=0.5,
                           n_ctx=4096, n_threads=4)
    settings = SettingsDialog(AppConfig(), report=fell_back)
    qtbot.addWidget(settings)
    settings.show()
    settings.speculative.setCurrentIndex(settings.speculative.findData("draft"))  # and no draft model
    settings._accept()
    assert settings.isVisible() and settings.error.isVisible() and "draft model" in settings.error.text()
    [fallback] = [w for w in settings.hardware.findChildren(QLabel) if "ran out of memory" in w.text()]
    connect = ConnectDialog()
    qtbot.addWidget(connect)
    connect.show()
    connect.url.setText("not a url")
    connect.list_models()
    assert "not a URL" in connect.status.text()
    tools = ToolsDialog()
    qtbot.addWidget(tools)
    tools.show()
    tools.edit.setPlainText("[{")
    tools.accept()
    assert tools.isVisible() and tools.error.isVisible()
    for choice in ("light", "dark", "light", "dark"):
        switch(qtbot, choice)
        dark = choice == "dark"
        settings.tabs.setCurrentIndex(1)  # the Model page, where Hardware says the fallback
        qtbot.wait(20)
        assert not settings.error.styleSheet() and not fallback.styleSheet()  # nothing baked in
        assert_in_level(settings.error, "error", dark, f"settings error, {choice}")
        assert_in_level(fallback, "warning", dark, f"hardware fallback, {choice}")
        assert_in_level(connect.status, "error", dark, f"connect error, {choice}")
        assert_in_level(tools.error, "error", dark, f"tools JSON error, {choice}")
    connect.url.setText("http://127.0.0.1:9/v1")
    connect._say("asking 127.0.0.1…")  # not an error any more: the plain text colour again
    fg, _bg = painted(connect.status)
    assert contrast(fg, connect.palette().color(QPalette.ColorRole.WindowText)) < 1.2
