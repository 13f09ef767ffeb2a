"""A reply goes on while the user reads or writes elsewhere, on the real model in the real window:
switching conversations (or New chat) never stops it, its row is marked while it is written, it
is sealed complete with its stats as if watched, coming back shows it streaming, Stop stops only
the conversation it is pressed in, a question sent elsewhere meanwhile is refused in one line
and kept, quitting asks, and Edit last removes nothing until the edited question is sent."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QAbstractItemView, QMessageBox

from app.chat.reply_format import ANY_JSON, ReplyFormat
from app.chat.tool_set import make_tool_set
from app.history.records import COMPLETE, INTERRUPTED, JSON_REPLY
from app.history.store import Store
from app.ui.history.panel import WRITING
from tests.ui.conftest import ask, decode_to_max_tokens, headers, seed, small_config

LONG = "Count from 1 to 300 in words, one number per line."
TOKENS = 120


def click(qtbot, win, conv_id: int) -> None:
    panel = win.history_panel
    item = panel.item_for(conv_id)
    assert item is not None, f"conversation {conv_id} is not in the list"
    rect = panel.list.visualItemRect(item)
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def written(win) -> str:
    """The text of the reply being generated so far ('' when none runs)."""
    run = win.flow._run
    return "".join(run.parts) if run is not None else ""


def tokens_so_far(win) -> int:
    run = win.flow._run
    return run.gauges.generated if run is not None else -1


def long_window(make_window, tokens: int = TOKENS):
    win = make_window(small_config(max_tokens=tokens))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    return win


def start(qtbot, win, text: str = LONG, chars: int = 10) -> int:
    """Send `text` and wait until the reply has written `chars` characters; its conversation id."""
    win.composer.set_text(text)
    assert win.flow.send()
    qtbot.waitUntil(lambda: len(written(win)) >= chars, timeout=30_000)
    return win.flow.conversation.id


def stored_reply(cid: int):
    with Store.open() as s:
        return s.get_conversation(cid).messages[-1]


def test_a_reply_runs_to_its_end_while_another_conversation_is_read(qtbot, make_window):
    other = seed("Tell me about owls.", "Owls hunt at night.")
    win = long_window(make_window)
    marks: list[int | None] = []
    win.flow.generating_changed.connect(marks.append)
    cid = start(qtbot, win)
    panel = win.history_panel
    assert panel.generating_id == cid and WRITING in panel.item_for(cid).toolTip()
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as blocker:
        click(qtbot, win, other)
        assert win.flow.conversation.id == other and not win.flow.busy and win.flow.generating
        shown = win.view.toPlainText()
        assert "Owls hunt at night." in shown and "Count from 1" not in shown
        assert win.composer.send_button.text() == "Send" and win.edit_button.isEnabled()
        assert panel.generating_id == cid, "the row being written stays marked"
        assert panel.item_for(other).isSelected() and not panel.item_for(cid).isSelected()
        qtbot.keyClick(win, Qt.Key.Key_Escape)  # Stop here: nothing runs here, so nothing stops
        assert win.flow.generating
    msg = blocker.args[0]
    assert msg.stats.decode_tokens == TOKENS and msg.stats.stop_reason != "cancelled"
    assert win.view.toPlainText() == shown, "the reply ended where it belongs, not in this view"
    reply = stored_reply(cid)
    assert (reply.state, reply.content, reply.stats) == (COMPLETE, msg.content, msg.stats)
    assert marks == [cid, None] and panel.generating_id is None
    assert WRITING not in panel.item_for(cid).toolTip()
    click(qtbot, win, cid)  # opened again: the whole reply, with its stats footer
    assert msg.stats.summary() in win.view.toPlainText() and "partial reply" not in win.view.toPlainText()


def test_coming_back_shows_the_reply_streaming_and_it_ends_there(qtbot, make_window):
    other = seed("What is a comet?", "A ball of ice.")
    win = long_window(make_window, 200)
    cid = start(qtbot, win)
    click(qtbot, win, other)
    away = tokens_so_far(win)
    qtbot.waitUntil(lambda: tokens_so_far(win) >= away + 10, timeout=30_000)  # written unseen
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as blocker:
        click(qtbot, win, cid)
        assert win.flow.busy and win.composer.send_button.text() == "Stop"
        assert not win.edit_button.isEnabled() and not win.regen_button.isEnabled()
        qtbot.waitUntil(lambda: written(win)[:40] in win.view.toPlainText(), timeout=5_000)
        assert "A ball of ice." not in win.view.toPlainText()
        back = len(win.view.toPlainText())
        paints = win.view.stream_paints
        qtbot.waitUntil(lambda: win.view.stream_paints >= paints + 3
                        and len(win.view.toPlainText()) > back, timeout=30_000)  # it grows here
    msg = blocker.args[0]
    assert msg.stats.decode_tokens == 200 and win.view.final_paints == 1
    text = win.view.toPlainText()
    assert msg.stats.summary() in text and headers(text, "You") == 1, "drawn once, with its footer"
    assert not win.flow.busy and win.composer.send_button.text() == "Send"
    assert stored_reply(cid).state == COMPLETE


def test_clicking_the_open_conversation_neither_stops_nor_redraws_it(qtbot, make_window):
    seed("Tell me about owls.", "Owls hunt at night.")
    win = long_window(make_window)
    cid = start(qtbot, win)
    job, conv = win.flow.job, win.flow.conversation
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as blocker:
        paints = win.view.stream_paints
        click(qtbot, win, cid)
        click(qtbot, win, cid)
        assert win.flow.job is job and win.flow.conversation is conv and win.flow.busy
        assert win.view.stream_paints >= paints, "the live reply was not begun again"
        assert "partial reply" not in win.view.toPlainText()
    assert blocker.args[0].stats.decode_tokens == TOKENS
    assert stored_reply(cid).state == COMPLETE


def test_new_chat_leaves_a_json_reply_to_finish_valid(qtbot, make_window):
    win = make_window(small_config(max_tokens=160))
    win.reply_format.choose(ReplyFormat(ANY_JSON))
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as blocker:
        win.composer.set_text("Describe Madrid in one object.")
        assert win.flow.send()
        cid = win.flow.conversation.id
        win.new_button.click()  # at once: prefill and decode all happen unseen
        assert win.flow.conversation.id is None and win.flow.conversation.messages == []
        assert win.flow.generating and not win.flow.busy
    msg = blocker.args[0]
    assert isinstance(json.loads(msg.content), dict) and msg.format == JSON_REPLY
    reply = stored_reply(cid)
    assert (reply.state, reply.format, reply.stats) == (COMPLETE, JSON_REPLY, msg.stats)
    assert json.loads(reply.content) == json.loads(msg.content)


def test_a_tool_turn_goes_on_to_its_answer_unseen(qtbot, make_window):
    win = make_window(small_config(max_tokens=40))
    win.tools.choose(make_tool_set(["calculator"], (), "calculator"))
    finished: list = []
    win.flow.reply_finished.connect(finished.append)
    win.composer.set_text("What is 17 times 23?")
    assert win.flow.send()
    cid = win.flow.conversation.id
    win.new_button.click()
    qtbot.waitUntil(lambda: not win.flow.generating and finished and not finished[-1].tool_calls,
                    timeout=120_000)
    assert win.flow.conversation.messages == [] and "calculator" not in win.view.toPlainText()
    assert not win.tool_result.isVisible()
    with Store.open() as s:
        msgs = s.get_conversation(cid).messages
    assert [m.role for m in msgs[:3]] == ["user", "assistant", "tool"] and msgs[1].tool_calls
    assert msgs[2].tool_name == "calculator" and msgs[2].content
    assert msgs[-1].role == "assistant" and msgs[-1].state == COMPLETE and not msgs[-1].tool_calls
    assert msgs[-1].stats == finished[-1].stats


def test_a_question_sent_elsewhere_meanwhile_is_refused_in_one_line_and_kept(qtbot, make_window):
    win = long_window(make_window, 400)
    cid = start(qtbot, win)
    title = win.flow.conversation.title
    win.new_chat()
    win.composer.set_text("Say hi.")
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)
    assert win.composer.text() == "Say hi.", "the question stays in the box"
    assert win.flow.conversation.messages == [] and win.flow.conversation.id is None
    line = win.bar.text()
    assert line.startswith(f"A reply is still being written in «{title}»: wait for it or stop it there")
    assert "\n" not in line and win.bar.action.isVisible()
    with Store.open() as s:
        assert [c.id for c in s.list_conversations()] == [cid], "nothing was saved for it"
    win.bar.action.click()  # "Open it"
    assert win.flow.conversation.id == cid and win.flow.busy
    with qtbot.waitSignal(win.flow.reply_finished, timeout=30_000) as blocker:
        win.composer.send_button.click()  # Stop, pressed where the reply is written
    assert blocker.args[0].stats.stop_reason == "cancelled"
    assert win.composer.text() == "Say hi.", "Stop does not touch what was typed"
    win.new_chat()
    win.flow.settings_source = lambda: replace(win.config.generation(), max_tokens=8)
    reply = ask(qtbot, win, "Say hi.")  # the engine is free: it is sent now
    assert reply.stats.decode_tokens > 0


def test_stop_stops_only_the_conversation_it_is_pressed_in(qtbot, make_window):
    other = seed("What is a comet?", "A ball of ice.")
    win = long_window(make_window, 400)
    cid = start(qtbot, win)
    click(qtbot, win, other)
    win.flow.stop()
    qtbot.wait(200)
    assert win.flow.generating, "Stop in another conversation left it alone"
    click(qtbot, win, cid)
    with qtbot.waitSignal(win.flow.reply_finished, timeout=30_000) as blocker:
        qtbot.keyClick(win, Qt.Key.Key_Escape)
    msg = blocker.args[0]
    assert msg.stats.stop_reason == "cancelled" and 0 < msg.stats.decode_tokens < 400
    assert win.history_panel.generating_id is None


def test_deleting_the_conversation_being_written_stops_it_and_undo_keeps_its_text(qtbot, make_window):
    other = seed("What is a comet?", "A ball of ice.")
    win = long_window(make_window, 400)
    cid = start(qtbot, win, chars=20)
    click(qtbot, win, other)
    win.history.delete(cid)
    assert not win.flow.generating and win.history_panel.generating_id is None
    assert win.flow.conversation.id == other and "A ball of ice." in win.view.toPlainText()
    win.bar.action.click()  # Undo
    reply = stored_reply(cid)
    assert reply.state == INTERRUPTED and len(reply.content) >= 20


def test_a_reply_ending_unseen_leaves_a_rename_being_typed_alone(qtbot, make_window):
    other = seed("What is a comet?", "A ball of ice.")
    win = long_window(make_window, 60)
    start(qtbot, win)
    click(qtbot, win, other)
    panel = win.history_panel
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        panel.rename(other)
        assert panel.list.state() == QAbstractItemView.State.EditingState
    assert panel.list.state() == QAbstractItemView.State.EditingState, "the title being typed stays"


class UserClose(QCloseEvent):
    """A close from the window system (the title bar's button), as the user makes it."""

    def spontaneous(self) -> bool:
        return True


def answer(monkeypatch, label: str, asked: list[str]) -> None:
    def exec_(box: QMessageBox) -> int:
        asked.append(f"{box.text()} {box.informativeText()}")
        button = next(b for b in box.buttons() if b.text().replace("&", "") == label)
        button.click()
        return 0
    monkeypatch.setattr(QMessageBox, "exec", exec_)


def test_quitting_while_a_reply_is_written_asks_first(qtbot, make_window, monkeypatch):
    other = seed("What is a comet?", "A ball of ice.")
    win = long_window(make_window, 400)
    cid = start(qtbot, win)
    title = win.flow.conversation.title
    click(qtbot, win, other)  # written in the background: quitting still asks
    asked: list[str] = []
    answer(monkeypatch, "Cancel", asked)
    ev = UserClose()
    win.closeEvent(ev)
    assert not ev.isAccepted() and win.flow.generating and win.bridge.engine_thread.isRunning()
    assert asked and f"«{title}»" in asked[0] and "Quit anyway" in asked[0]
    answer(monkeypatch, "Quit anyway", asked)
    ev = UserClose()
    win.closeEvent(ev)
    assert ev.isAccepted() and win.bridge.engine_thread.isFinished()
    reply = stored_reply(cid)
    assert reply.state == INTERRUPTED and reply.content.strip()


def test_quitting_with_nothing_written_does_not_ask(qtbot, make_window, monkeypatch):
    win = make_window(small_config(max_tokens=8))
    ask(qtbot, win, "Say hi.")
    asked: list[str] = []
    answer(monkeypatch, "Cancel", asked)
    ev = UserClose()
    win.closeEvent(ev)
    assert ev.isAccepted() and asked == []


@pytest.mark.parametrize("leave", ["new chat", "switch"])
def test_edit_last_removes_nothing_until_the_edited_question_is_sent(qtbot, make_window, leave):
    other = seed("What is a comet?", "A ball of ice.")
    win = make_window(small_config(max_tokens=8))
    first = ask(qtbot, win, "Name three colours.")
    cid = win.flow.conversation.id
    win.edit_button.click()
    assert win.composer.text() == "Name three colours." and win.flow.conversation.messages == []
    with Store.open() as s:
        assert [m.content for m in s.get_conversation(cid).messages] == ["Name three colours.", first.content]
    if leave == "new chat":
        win.new_button.click()
    else:
        click(qtbot, win, other)
    with Store.open() as s:
        kept = s.get_conversation(cid).messages
    assert [(m.role, m.content, m.stats) for m in kept] == \
           [("user", "Name three colours.", None), ("assistant", first.content, first.stats)]
    click(qtbot, win, cid)  # reopened: the exchange is there
    assert [m.content for m in win.flow.conversation.messages] == ["Name three colours.", first.content]
    assert first.stats.summary() in win.view.toPlainText()

    win.edit_button.click()  # this time the edit is sent: only then does the old exchange go
    win.composer.set_text("Name three animals.")
    second = ask(qtbot, win, "Name three animals.")
    with Store.open() as s:
        msgs = s.get_conversation(cid).messages
    assert [(m.role, m.content) for m in msgs] == [("user", "Name three animals."),
                                                   ("assistant", second.content)]
