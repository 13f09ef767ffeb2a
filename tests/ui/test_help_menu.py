"""The Help menu of the real window: About with the versions and where the chat runs, the keyboard
shortcuts as the window defines them (one added later is listed too), the README, and the data
folders with a working Open each. And the Tools button leaves its menu arrow room."""

from __future__ import annotations

import llama_cpp
from PySide6.QtCore import QUrl
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QStyle, QStyleOptionButton

import app
from app import paths
from app.ui import help_menu
from app.ui.chat.tools_chooser import MAX_WIDTH, ToolsChooser
from tests.ui.conftest import small_config


def native(keys: str) -> str:
    return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)


def test_help_is_the_last_menu_with_about_shortcuts_readme_and_folders(qtbot, make_window, monkeypatch):
    opened: list[QUrl] = []
    monkeypatch.setattr(help_menu.QDesktopServices, "openUrl", staticmethod(opened.append))
    win = make_window(small_config())
    menus = [a.text() for a in win.menuBar().actions()]
    assert menus[-1] == "&Help"
    hm = win.help_menu
    assert [a.text() for a in hm.menu.actions() if not a.isSeparator()] == [
        "&Keyboard shortcuts", "&README", "&Where my data lives", "&About LlamaDesk"]

    about = hm.show_about()
    text = about.plain()
    assert app.__version__ in text and llama_cpp.__version__ in text
    assert win.loaded.report.runs_on in text and "llama.cpp" in text
    about.close()

    shortcuts = hm.show_shortcuts()
    rows = dict(shortcuts.rows())
    defined = {native(k) for k in ("Ctrl+N", "Esc", "Ctrl+Shift+S", "Ctrl+L", "Ctrl+,", "Ctrl+B",
                                   "Ctrl+Shift+C", "Ctrl+E", "Ctrl+Shift+M")}
    assert defined <= set(rows), set(rows) ^ defined
    every = {native(s.key().toString()) for s in win.findChildren(QShortcut)} | {
        a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        for a in win.menuBar().findChildren(help_menu.QAction) if not a.shortcut().isEmpty()}
    assert set(rows) == every  # every one the window has, and nothing it has not
    assert rows[native("Ctrl+N")] == "Start a new conversation"
    assert rows[native("Esc")] == "Stop the reply" and "(no description)" not in rows.values()
    assert rows[native("Ctrl+Shift+M")] == "Get models"
    assert rows[native("Ctrl+E")] == "Export the conversation shown"
    shortcuts.close()
    later = QShortcut(QKeySequence("Ctrl+Shift+F9"), win)
    later.setWhatsThis("Something added later")
    assert dict(hm.show_shortcuts().rows())[native("Ctrl+Shift+F9")] == "Something added later"
    hm.dialog.close()
    models = win.models.open()  # another window's shortcuts (Esc, Ctrl+W closing it) are its own
    assert {s.keys for s in help_menu.window_shortcuts(win)} == set(rows) | {native("Ctrl+Shift+F9")}
    models.close()

    folders = hm.show_folders()
    assert set(folders.open_buttons) == {"Settings", "Data", "Models", "Cache"}
    folders.open_buttons["Data"].click()
    folders.open_buttons["Cache"].click()
    assert opened == [QUrl.fromLocalFile(str(paths.data_dir())), QUrl.fromLocalFile(str(paths.cache_dir()))]
    models_dir = paths.user_models_dir(create=False)
    assert folders.open_buttons["Models"].isEnabled() == models_dir.is_dir()
    folders.close()

    opened.clear()
    hm.readme_action.trigger()
    if help_menu.README.is_file():  # run from source: the checkout's README
        assert opened == [QUrl.fromLocalFile(str(help_menu.README))]
    monkeypatch.setattr(help_menu, "README", paths.data_dir() / "no-README.md")  # an installed copy
    opened.clear()
    shown = hm.show_readme()  # no file and no project page: the README installed with the package
    assert opened == [] and shown is not None
    assert "# LlamaDesk" in shown.findChild(help_menu.QTextBrowser).toMarkdown()
    shown.close()


def test_the_tools_button_leaves_room_for_its_menu_arrow(qtbot):
    chooser = ToolsChooser()
    qtbot.addWidget(chooser)
    chooser.show()
    b = chooser.button
    opt = QStyleOptionButton()
    b.initStyleOption(opt)
    arrow = b.style().pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, opt, b)
    assert b.text() == "No tools" and b.menu() is chooser.menu
    assert b.width() >= b.fontMetrics().horizontalAdvance(b.text()) + arrow  # text and arrow side by side
    assert b.maximumWidth() == MAX_WIDTH
