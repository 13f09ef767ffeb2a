"""The conversation list in the real window: list, switch, rename, delete+undo, search,
and replies saved while they are generated (real SQLite under the test's XDG dir)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from app.history.store import Store, default_path
from tests.ui.conftest import ask, decode_to_max_tokens, seed, small_config


def click(qtbot, panel, conv_id: int) -> None:
    item = panel.item_for(conv_id)
    assert item is not None, f"conversation {conv_id} is not in the list"
    rect = panel.list.visualItemRect(item)
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_list_shows_saved_conversations_and_a_new_chat_after_its_first_message(qtbot, make_window):
    a = seed("Tell me about owls.", "Owls hunt at night.")
    b = seed("What is a comet?", "A ball of ice.")
    win = make_window(small_config(max_tokens=8))
    panel = win.history_panel
    assert set(panel.ids()) == {a, b}
    item = panel.item_for(a)
    assert item.text() == "Tell me about owls."
    assert "2 messages" in item.data(Qt.ItemDataRole.UserRole + 1)
    ask(qtbot, win, "Name three colours.")
    new = win.flow.conversation.id
    assert panel.ids()[0] == new, "the new chat is listed first, after its first message"
    assert panel.item_for(new).text() == "Name three colours."
    assert panel.list.currentItem() is panel.item_for(new)


def test_switching_restores_messages_stats_and_out_of_context_markers(qtbot, make_window):
    win = make_window(small_config(n_ctx=256, max_tokens=16))
    filler = "Please remember this sentence about lighthouses and the sea. " * 6
    for _ in range(3):
        last = ask(qtbot, win, filler)
    first = win.flow.conversation.id
    assert any(m.out_of_context for m in win.flow.conversation.messages)
    win.new_chat()
    ask(qtbot, win, "Say hi.")
    assert "lighthouses" not in win.view.toPlainText()
    click(qtbot, win.history_panel, first)
    assert win.flow.conversation.id == first
    msgs = win.flow.conversation.messages
    assert len(msgs) == 6 and msgs[0].out_of_context and not msgs[-1].out_of_context
    assert msgs[-1].stats == last.stats
    text = win.view.toPlainText()
    assert last.stats.summary() in text and "out of context" in text
    assert "lighthouses" in text and "Say hi." not in text


def test_rename_in_place_persists(qtbot, make_window):
    cid = seed("Old question", "Old answer")
    win = make_window(small_config())
    panel = win.history_panel
    rect = panel.list.visualItemRect(panel.item_for(cid))
    click(qtbot, panel, cid)  # a real double-click starts with a click (which opens it)
    qtbot.mouseDClick(panel.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    editor = QApplication.focusWidget()
    assert isinstance(editor, QLineEdit), "double-click opens an in-place editor"
    editor.selectAll()
    qtbot.keyClicks(editor, "Renamed chat")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.item_for(cid).text() == "Renamed chat", timeout=2000)
    with Store.open() as s:
        assert s.get_conversation(cid).title == "Renamed chat"


def test_delete_then_undo_restores_the_conversation(qtbot, make_window):
    keep = seed("Keep me", "Kept.")
    gone = seed("Delete me", "Soon gone.")
    win = make_window(small_config())
    panel = win.history_panel
    click(qtbot, panel, gone)
    assert win.flow.conversation.id == gone
    panel.list.setFocus()
    qtbot.keyClick(panel.list, Qt.Key.Key_Delete)
    assert panel.ids() == [keep]
    assert win.flow.conversation.id is None and win.flow.conversation.messages == []
    assert win.bar.text() == "Deleted 'Delete me'"
    with Store.open() as s:
        assert [c.id for c in s.list_conversations()] == [keep]
    win.bar.action.click()  # Undo
    assert set(panel.ids()) == {keep, gone}
    with Store.open() as s:
        assert s.get_conversation(gone).messages[1].content == "Soon gone."


def test_search_finds_a_message_in_another_conversation_and_opens_it(qtbot, make_window):
    target = seed("Where do penguins live?", "Penguins live in the Southern Hemisphere.")
    seed("Tell me about owls.", "Owls hunt at night.")
    win = make_window(small_config())
    panel = win.history_panel
    qtbot.keyClicks(panel.search, "hemisphere")
    assert panel.ids() == [target]
    assert "Southern Hemisphere" in panel.item_for(target).data(Qt.ItemDataRole.UserRole + 1)
    click(qtbot, panel, target)
    assert win.flow.conversation.id == target
    assert win.view.textCursor().selectedText().lower() == "hemisphere", "the match is selected"
    panel.search.clear()
    assert len(panel.ids()) == 2


def test_search_looks_in_the_thinking_only_when_asked(qtbot, make_window):
    from app.history.store import Store

    with Store.open() as s:
        thought = s.create_conversation()
        s.add_message(thought, "user", "Which bird?")
        s.add_message(thought, "assistant", "The heron.", reasoning="Maybe a pelican; no, a heron.")
    seed("Pelican facts?", "A pelican has a pouch.")
    win = make_window(small_config())
    panel = win.history_panel
    qtbot.keyClicks(panel.search, "pelican")
    assert thought not in panel.ids() and len(panel.ids()) == 1  # answers only
    panel.in_thinking.setChecked(True)
    assert thought in panel.ids() and len(panel.ids()) == 2
    assert panel.item_for(thought).data(Qt.ItemDataRole.UserRole + 1).startswith("assistant (thinking): ")


LONG = "Count from 1 to 300 in words, one number per line."


def test_a_reply_is_in_the_database_while_it_is_generated(qtbot, make_window):
    win = make_window(small_config(max_tokens=600))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    win.composer.set_text(LONG)
    seen = []
    with Store.open() as other:  # a second connection, as another process would read it
        def saved_partial():
            if not win.flow.busy or win.flow.conversation.id is None:
                return False
            msgs = other.get_conversation(win.flow.conversation.id).messages
            seen.append([(m.state, len(m.content)) for m in msgs if m.role == "assistant"])
            return any(st == "generating" and n > 0 for st, n in seen[-1])
        with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as blocker:
            assert win.flow.send()
            qtbot.waitUntil(saved_partial, timeout=30_000)
            assert win.flow.busy, "saved before the reply finished"
            win.flow.stop()
        final = other.get_conversation(win.flow.conversation.id).messages[-1]
    assert final.state == "complete" and final.content == blocker.args[0].content
    assert final.stats == blocker.args[0].stats


CRASH = textwrap.dedent("""
    import os, signal
    from app.history.store import Store, default_path
    s = Store.open()
    c = s.create_conversation()
    s.add_message(c, "user", "Write a poem about rain.")
    r = s.begin_reply(c)
    s.update_reply(r, "Rain on the roof, soft and")
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_reply_cut_by_a_killed_process_shows_tagged_interrupted(qtbot, make_window):
    proc = subprocess.run([sys.executable, "-c", CRASH], capture_output=True, timeout=60)
    assert proc.returncode == -9
    win = make_window(small_config())
    assert win.store.recovered == 1
    cid = win.history_panel.ids()[0]
    click(qtbot, win.history_panel, cid)
    text = win.view.toPlainText()
    assert "interrupted (partial reply)" in text and "Rain on the roof, soft and" in text
    assert win.flow.conversation.messages[-1].state == "interrupted"


# --- hostile history files ------------------------------------------------------

def test_when_shows_unknown_for_times_no_clock_produced():
    from app.ui.history.panel import when

    now = 1733040000.0
    assert when(now, now) == time.strftime("%H:%M", time.localtime(now))
    for bad in (1e300, -1e300, float("inf"), float("nan"), 9e18, -5, "soon", None):
        assert when(bad, now) == "?", bad


@pytest.mark.parametrize("stored", ["1e300", "9e18", "'soon'"])
def test_the_window_opens_with_a_stored_time_out_of_range(qtbot, make_window, stored):
    bad = seed("Odd times", "Still readable.")
    fine = seed("Normal", "Fine.")
    conn = sqlite3.connect(default_path())
    conn.execute(f"UPDATE conversations SET updated_at = {stored}, created_at = {stored} WHERE id = ?",
                 (bad,))
    conn.execute(f"UPDATE messages SET created_at = {stored} WHERE conversation_id = ?", (bad,))
    conn.commit()
    conn.close()
    win = make_window(small_config())
    panel = win.history_panel
    assert set(panel.ids()) == {bad, fine}
    assert panel.item_for(bad).data(Qt.ItemDataRole.UserRole + 1).startswith("? · 2 messages")
    click(qtbot, panel, bad)
    assert win.flow.conversation.id == bad and "Still readable." in win.view.toPlainText()


@pytest.fixture
def read_only_history():
    """The history folder made read-only in a way that holds even for root."""
    folder = default_path().parent
    seed("Saved before", "Kept.")  # no models/ folder in it: looking for models must not create one
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        yield folder
        os.chmod(folder, 0o755)
        return
    r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"this container refuses chattr +i: {r.stderr.strip()}")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_history_folder_gives_a_warning_and_the_window_still_chats(qtbot, make_window,
                                                                              read_only_history):
    before = (read_only_history / "llamadesk.db").read_bytes()
    win = make_window(small_config(max_tokens=4))
    assert win.store is None and win.bar.level == "warning"
    text = win.bar.text()
    assert "will not be saved" in text and "read-only" in text and "\n" not in text
    reply = ask(qtbot, win, "Say hi.")
    assert reply.content
    assert (read_only_history / "llamadesk.db").read_bytes() == before
    assert not list(read_only_history.glob("*.unreadable-*"))
