"""A first launch as a newcomer meets it: a way in, gauges that say what will come, nothing clipped."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QRect, Qt, QUrl
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QFileDialog, QStatusBar, QToolTip

from app.ui.chat.welcome import EXAMPLES
from app.ui.model_bar import DEFAULT_LABEL
from tests.ui.conftest import ask, small_config


def test_the_first_launch_has_a_welcome_with_examples_and_gauges_that_say_what_will_come(qtbot, make_window):
    win = make_window(small_config(max_tokens=8))
    area, g = win.chat_area, win.gauges
    assert area.currentWidget() is area.welcome
    assert all(text in area.welcome.toPlainText() for text in EXAMPLES)
    assert "will show after your first message" in g.phase.text()
    assert g.plot_box.currentWidget() is g.plot_box.note  # no empty 0-1 axes
    assert g.timeline_box.currentWidget() is g.timeline_box.note
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        area.welcome.anchorClicked.emit(QUrl("ask:1"))  # a click on the second example
    assert win.flow.conversation.messages[0].content == EXAMPLES[1]
    assert area.currentWidget() is win.view
    assert g.plot_box.currentWidget() is g.plot and g.timeline_box.currentWidget() is g.timeline
    win.new_chat()
    assert area.currentWidget() is area.welcome  # an empty conversation again


def test_nothing_is_clipped_at_the_default_size_and_at_900_by_600(qtbot, make_window):
    win = make_window(small_config(max_tokens=8))
    assert win.bar.isVisible()  # the model's "no chat template" line takes its room too
    win.resize(1200, 800)  # the size `llamadesk` opens at
    ask(qtbot, win, "Name three colours.")
    qtbot.wait(100)
    assert win.gauges.verticalScrollBar().maximum() == 0, "the gauges fit without a scrollbar"
    win.resize(900, 600)  # the smallest the window gets
    qtbot.wait(100)
    g = win.gauges
    assert g.widget().width() <= g.viewport().width()  # scrolled if need be, never cut on the right
    mb = win.model_bar
    assert mb.status.geometry().right() < mb.streaming.geometry().left()  # no text under the Stream box
    assert mb.combo.width() >= mb.combo.fontMetrics().horizontalAdvance(DEFAULT_LABEL)  # the name whole
    legend = win.gauges.timeline_text.text()
    assert "■</span>&nbsp;wait" in legend  # a swatch never lands on another line than its words


def test_a_long_tooltip_wraps(qtbot, make_window):
    win = make_window(small_config())
    tile = win.gauges.ttft
    assert len(tile.toolTip()) > 100
    at = QPoint(5, 5)
    QApplication.sendEvent(tile, QHelpEvent(QEvent.Type.ToolTip, at, tile.mapToGlobal(at)))
    assert QToolTip.isVisible() and QToolTip.text().startswith("<table width=")
    QToolTip.hideText()


def test_nothing_moves_when_the_first_reply_and_the_first_status_line_come(qtbot, make_window, monkeypatch,
                                                                            tmp_path):
    win = make_window(small_config(max_tokens=4))
    export, send = win.history_panel.export_button, win.composer.send_button

    def where() -> list[QRect]:
        qtbot.wait(50)  # the layout settles
        return [QRect(b.mapTo(win, QPoint(0, 0)), b.size()) for b in (export, send)]

    before = where()
    bar = win.findChild(QStatusBar)  # not statusBar(), which would make one
    assert bar is not None and bar.isVisible()  # its room is kept from the start
    ask(qtbot, win, "Hi")
    assert where() == before
    out = tmp_path / "chat.md"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *_a: (str(out), "")))
    qtbot.keyClick(win, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)  # says "Exported to" below
    qtbot.waitUntil(lambda: out.exists() and win.history.files.busy is None, timeout=10_000)
    assert bar.currentMessage().startswith("Exported to")
    assert where() == before
