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
from PySide6.QtWidgets import QWidget

from app.chat.tool_set import declared_tools, make_tool_set
from app.engine.prompt import TRANSCRIPT_NOTICE
from app.ui import theme
from app.ui.load_notes import EXPLAINED
from app.ui.model_bar import ModelBar
from app.ui.models.labels import FIT_COLOURS, fit_colour
from app.ui.widgets.levels import LevelLabel, contrast
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
