"""The window at its smallest, 900x600, and at 1600x1000: the first-launch panel leaves the chat
room, the model bar's line is cut with "…" (and said whole on hover), every button in the actions
row gets the width it asks for, and the settings' prompt cache text the height its words need.

Thresholds are kept loose where fonts decide (offscreen and Xvfb draw differently); what is
asserted is what a user would see go wrong: a chat a few lines tall, a line cut without a mark,
a button narrower than its own text."""

from __future__ import annotations

import itertools
import socket

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QPushButton, QWidget

from app.config import AppConfig, save_config
from app.engine.loader import LoadReport
from app.ui.chat.actions_row import ActionsRow
from app.ui.model_bar import ModelBar
from app.ui.settings.dialog import SettingsDialog
from tests.ui.conftest import small_config

CHAT_KEEPS = 200  # px of transcript at 900x600 with the first-launch panel up


def report(**kw) -> LoadReport:
    base = dict(model_path="/models/a-model.gguf", backend="CPU", gpu_offload_supported=False,
                n_gpu_layers_requested=0, layers_offloaded=0, layers_total=18, fallback=None, load_s=0.4,
                n_ctx=4096, n_threads=7, n_threads_batch=8)
    return LoadReport(**{**base, **kw})


@pytest.fixture
def first_launch_window(qtbot, monkeypatch):
    """The window as a first launch opens it: the bundled model, the first-launch panel up, and
    offline (the Hub's port refuses at once), so the panel's fit checks fail fast."""
    from app.ui.window import MainWindow

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    save_config(small_config())
    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.loaded is not None, timeout=120_000)  # the template bar is up too
    yield win
    win.close()
    assert win.bridge.engine_thread.isFinished()


def settle(qtbot, win: QWidget, w: int, h: int) -> None:
    win.resize(w, h)
    qtbot.wait(150)  # the layout and the panel's share follow the resize


def inside(widget: QWidget, area: QWidget) -> bool:
    """Whether `widget` is wholly within `area`'s rectangle (both visible)."""
    r = QRect(widget.mapTo(area, QPoint(0, 0)), widget.size())
    return widget.isVisible() and area.rect().contains(r)


def test_at_900_by_600_the_first_launch_panel_leaves_the_chat_room_and_its_offers_reachable(
        qtbot, first_launch_window):
    win = first_launch_window
    panel = win.models.panel
    assert panel is not None and panel.isVisible() and win.bar.isVisible()
    settle(qtbot, win, 900, 600)
    assert win.chat_area.height() >= CHAT_KEEPS, f"the chat is {win.chat_area.height()} px tall"
    view = panel.scroller.viewport()
    assert inside(panel.intro, panel) and inside(panel.buttons[0], view)  # the first offer at once
    for button in panel.buttons:  # the rest a scroll away, each whole when scrolled to
        panel.scroller.ensureWidgetVisible(button, 0, 0)
        qtbot.wait(20)
        assert inside(button, view), button.toolTip()
    with qtbot.waitSignal(panel.download_requested) as got:
        panel.buttons[-1].click()
    assert got.args == [panel.specs()[-1]]
    win.models.models_window.close()

    tall = win.chat_area.height()
    panel.fold_button.click()  # down to its first line
    qtbot.wait(100)
    assert panel.folded and not panel.scroller.isVisible() and inside(panel.intro, panel)
    assert win.chat_area.height() > tall + 40
    panel.fold_button.click()
    qtbot.wait(100)
    assert not panel.folded and panel.scroller.isVisible()

    settle(qtbot, win, 1600, 1000)  # room enough: everything shown, nothing to scroll
    assert panel.scroller.verticalScrollBar().maximum() == 0
    assert win.chat_area.height() >= 2 * CHAT_KEEPS


def test_the_model_bar_cuts_its_line_with_an_ellipsis_and_says_it_whole_on_hover(qtbot):
    host = QWidget()
    qtbot.addWidget(host)
    bar = ModelBar(host)
    bar.set_loaded(report())
    host.show()
    status = bar.status
    whole = "runs on CPU · ctx 4096 · threads 7 decode, 8 prefill"
    assert status.full_text() == whole

    def drawn_width() -> float:  # what the label's rich text takes, as the label lays it out
        doc = QTextDocument()
        doc.setDefaultFont(status.font())
        doc.setDocumentMargin(0)
        doc.setHtml(status.text())
        return doc.idealWidth()

    for width in (620, 700):  # a 900-pixel window gives the line about 200 px
        bar.resize(width, 40)
        qtbot.wait(20)
        shown = status.shown_text()
        assert status.elided and shown.endswith("…") and len(shown) < len(whole), shown
        assert whole.startswith(shown[:-1].rstrip())  # its beginning, cut where the room ends
        assert drawn_width() <= status.contentsRect().width() + 1  # nothing drawn past its edge
        assert status.toolTip().splitlines()[0] == whole  # the whole line on hover, then the story
        assert "loaded in 0.40 s" in status.toolTip()
        assert status.geometry().right() < bar.streaming.geometry().left()  # never under the Stream box
    bar.resize(1400, 40)
    qtbot.wait(20)
    assert not status.elided and status.shown_text() == whole
    assert not status.toolTip().startswith(whole)  # whole on screen: the tooltip adds only the story

    bar.set_loaded(report(fallback="CUDA ran out of memory: loaded on the CPU"))
    bar.resize(640, 40)
    qtbot.wait(20)
    shown = status.shown_text()
    assert status.elided and shown.endswith("… GPU fallback"), shown  # the warning is never the part cut


def buttons_get_their_room(row: QWidget, *extra: QPushButton) -> list[QPushButton]:
    shown = sorted((b for b in [*row.findChildren(QPushButton), *extra] if b.isVisible()),
                   key=lambda b: b.mapTo(row.window(), QPoint(0, 0)).x())
    for b in shown:
        assert b.width() >= b.sizeHint().width(), f"{b.text()}: {b.width()} px for {b.sizeHint().width()}"
        assert b.width() >= b.fontMetrics().horizontalAdvance(b.text()) + 8, b.text()
    row_buttons = [b for b in shown if b.parent() is row]
    for left, right in itertools.pairwise(row_buttons):
        assert left.geometry().right() < right.geometry().left(), f"{left.text()} touches {right.text()}"
    if row_buttons:
        assert row_buttons[-1].geometry().right() <= row.width()
    return shown


def test_every_button_of_the_actions_row_gets_its_room_at_900_and_1600(qtbot, make_window):
    win = make_window(small_config(max_tokens=4))
    a = win.actions_row
    settle(qtbot, win, 900, 600)
    shown = buttons_get_their_room(a, win.tools.button)
    assert {win.new_button, win.regen_button, win.edit_button} <= set(shown)
    assert a.folded and a.more_button.isVisible()  # the rest under More, not squeezed
    assert set(a.folded) | set(shown) >= {win.batch_button, win.compare_button, win.serve_button}
    a.more_menu.aboutToShow.emit()  # as it opens (popping it up offscreen cannot grab the keyboard)
    assert [x.text() for x in a.more_menu.actions()] == [b.text() for b in a.folded]
    with qtbot.waitSignal(a.folded[-1].clicked):  # a folded one works from the menu
        a.more_menu.actions()[-1].trigger()
    for child in win.findChildren(QWidget):  # what the menu opened (Serve…, Compare… or Batch…)
        if child.isWindow() and child is not win and child.isVisible():
            child.close()

    settle(qtbot, win, 1600, 1000)
    shown = buttons_get_their_room(a, win.tools.button)
    assert not a.folded and not a.more_button.isVisible()
    assert {win.batch_button, win.compare_button, win.serve_button} <= set(shown)


def test_the_actions_row_folds_from_the_right_as_the_width_needs(qtbot):
    host = QWidget()  # a child, as in the window: a window of its own keeps its layout's minimum
    qtbot.addWidget(host)
    row = ActionsRow(host)
    host.resize(800, 40)
    host.show()
    counts = []
    for width in (700, 520, 460, 420, 380):
        row.resize(width, 30)
        qtbot.wait(10)
        assert row.width() == width
        buttons_get_their_room(row)
        counts.append(len(row.folded))
        assert row.folded == row.foldable[len(row.foldable) - len(row.folded):]  # Serve… goes first
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == len(row.foldable)


def test_the_prompt_cache_line_has_the_height_its_words_need(qtbot):
    dlg = SettingsDialog(AppConfig())
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.tabs.setCurrentIndex(2)
    assert dlg.tabs.tabText(2) == "Prompt"
    page = dlg.tabs.widget(2)
    label = dlg.cache_label
    for width in (dlg.width(), dlg.minimumSizeHint().width(), 900):  # as it opens, its narrowest, wide
        dlg.resize(width, dlg.height())
        qtbot.wait(50)
        need = label.heightForWidth(label.width())
        assert label.height() >= need, f"{label.height()} px for {need} at {label.width()} wide"
        assert inside(label, page) and inside(dlg.clear_cache_button, page)
        if width < 900:
            assert need > label.fontMetrics().height()  # it wraps at this width: the case that was cut


def test_the_system_prompt_stays_readable_at_900_and_shares_its_line_when_wide(qtbot, make_window):
    from app.ui.chat.setup_row import PROMPT_MIN_PX

    win = make_window(small_config(max_tokens=4))
    row, prompt = win.setup_row, win.system_prompt
    settle(qtbot, win, 900, 600)
    assert row.stacked and prompt.width() >= PROMPT_MIN_PX
    assert win.presets.geometry().right() <= row.choosers.width()  # the choosers whole, under it
    assert row.choosers.y() > prompt.y()
    settle(qtbot, win, 1600, 1000)
    assert not row.stacked and prompt.width() >= PROMPT_MIN_PX
    assert abs(row.choosers.y() - prompt.y()) < prompt.height(), "one line when there is room"
