"""After New chat the conversation list highlights nothing, since nothing saved is on screen, and
Export answers for the conversation on screen; a click on the old one highlights it, opens it,
and Export then saves that one (real window, real store under the test's XDG dir)."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.history.store import Store
from app.ui.history.panel import ID_ROLE
from tests.ui.conftest import ask, small_config


def test_the_highlight_is_what_export_acts_on(qtbot, make_window, tmp_path):
    win = make_window(small_config(max_tokens=8))
    ask(qtbot, win, "Name a colour.")
    old = win.flow.conversation.id
    panel = win.history_panel
    assert [i.data(ID_ROLE) for i in panel.list.selectedItems()] == [old]

    win.new_chat()
    assert panel.list.selectedItems() == [] and panel.list.currentItem() is None
    assert panel.ids() == [old]  # still listed, only not highlighted
    asked: list[int] = []
    panel.delete_requested.connect(asked.append)
    qtbot.keyClick(panel, Qt.Key.Key_Delete)
    assert asked == []  # Delete has no row to act on either
    assert win.history.export_current(str(tmp_path / "new.md")) is None
    assert "Nothing to export yet" in win.bar.text() and not (tmp_path / "new.md").exists()

    panel.list.itemClicked.emit(panel.item_for(old))  # the user clicks it: it opens
    assert win.flow.conversation.id == old
    assert [i.data(ID_ROLE) for i in panel.list.selectedItems()] == [old]
    out = tmp_path / "old.json"
    with qtbot.waitSignal(win.history.exported, timeout=10_000):
        assert win.history.export_current(str(out)) == str(out)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["conversation"]["messages"][0]["content"] == "Name a colour."

    win.new_chat()
    ask(qtbot, win, "Name a fruit.")
    new = win.flow.conversation.id
    assert new != old and [i.data(ID_ROLE) for i in panel.list.selectedItems()] == [new]
    with Store.open() as s:
        assert {c.id for c in s.list_conversations()} == {old, new}
