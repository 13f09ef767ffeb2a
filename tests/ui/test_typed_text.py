"""What a person typed, as the transcript shows it: indentation kept, code boxed, nothing widened."""

from __future__ import annotations

import pytest

from app.chat.conversation import LiveMessage

pytestmark = pytest.mark.gui

PASTED = "Why does this fail?\n\n```python\ndef f(x):\n    if x:\n        return 1\n```\nand   *this*  stays"


@pytest.fixture
def view(qtbot):
    from app.ui.chat.view import ChatView

    v = ChatView()
    qtbot.addWidget(v)
    v.resize(600, 400)
    v.show()
    return v


def test_pasted_code_keeps_its_indentation_in_a_code_box_with_copy(qtbot, view):
    view.add_message(LiveMessage("user", PASTED))
    shown = view.toPlainText()
    assert "def f(x):\n    if x:\n        return 1" in shown  # indentation as typed
    assert "```" not in shown  # the fence became a box, as in a reply
    assert "and   *this*  stays" in shown  # the rest as typed: spaces kept, no Markdown
    assert list(view._codes.values()) == ["def f(x):\n    if x:\n        return 1\n"]
    view._on_anchor(__import__("PySide6.QtCore", fromlist=["QUrl"]).QUrl("copy:0"))
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == "def f(x):\n    if x:\n        return 1\n"


def test_a_long_code_line_wraps_in_its_box_instead_of_widening_the_chat(qtbot, view):
    long = "x = [" + ", ".join(str(i) for i in range(300)) + "]"
    view.add_message(LiveMessage("assistant", f"```python\n{long}\n```\n"))
    view.add_message(LiveMessage("user", f"```\n{long}\n```"))
    qtbot.wait(50)
    assert view.horizontalScrollBar().maximum() == 0
    assert view.document().size().width() <= view.viewport().width() + 1
