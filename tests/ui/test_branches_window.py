"""Conversations as trees in the real window, on the real model and real SQLite: edit the second
question of a five-turn chat, switch between both branches with the earlier answers intact,
regenerate twice and flip through three alternatives, fork one into a new chat, delete a branch
(asked first), and find all of it again in a new window on the same history."""

from __future__ import annotations

from PySide6.QtCore import QUrl

from app.history.store import Store
from tests.ui.conftest import ask, small_config


def click(win, action: str, msg_id: int) -> None:
    """What a click on a message's link does (the view's anchorClicked)."""
    win.view.anchorClicked.emit(QUrl(f"msg:{action}/{msg_id}"))


def path(win) -> list[str]:
    return [m.content for m in win.flow.conversation.messages]


def test_edit_switch_regenerate_fork_and_reopen(qtbot, make_window):
    win = make_window(small_config(max_tokens=4))
    for n in range(1, 6):
        ask(qtbot, win, f"Question number {n}?")
    five = path(win)
    msgs = win.flow.conversation.messages
    assert len(msgs) == 10 and all(m.id is not None for m in msgs)
    q2 = msgs[2]

    click(win, "edit", q2.id)  # back into the box; the view ends before it, the store keeps it all
    assert win.composer.text() == "Question number 2?" and len(win.flow.conversation.messages) == 2
    win.composer.set_text("Question number two, edited?")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        win.flow.send()
    edited = win.flow.conversation.messages[2]
    assert path(win)[:3] == [*five[:2], "Question number two, edited?"] and len(path(win)) == 4
    assert edited.version() == (2, 2) and "2 / 2" in win.view.toPlainText()

    click(win, "show", q2.id)  # the first branch, whole, with its own answers
    assert path(win) == five
    assert win.flow.conversation.messages[2].version() == (1, 2)
    click(win, "show", edited.id)
    assert path(win)[2] == "Question number two, edited?"

    first = win.flow.conversation.messages[-1]
    for _ in range(2):
        with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as done:
            assert win.flow.regenerate()
    third = done.args[0]
    assert third.version() == (3, 3) and len(path(win)) == 4, "no question asked again"
    made = third.stats.made_with  # what wrote it, named beside its other versions
    assert made.startswith(win.loaded.identity["file"]) and "greedy" in made
    assert made in win.view.toPlainText()
    versions = third.alternatives
    assert versions[0] == first.id
    texts = []
    for v in versions:  # flip through the three replies
        click(win, "show", v)
        reply = win.flow.conversation.messages[-1]
        assert reply.id == v and reply.version() == (versions.index(v) + 1, 3)
        texts.append(reply.content)
        assert f"{versions.index(v) + 1} / 3" in win.view.toPlainText()
    assert all(isinstance(t, str) for t in texts)

    original = win.flow.conversation.id
    click(win, "fork", win.flow.conversation.messages[1].id)  # the first answer: a new chat from it
    assert win.flow.conversation.id != original and path(win) == five[:2]
    assert win.flow.conversation.title.endswith("(fork)")

    win.history.open(original)
    asked = []
    win.branches.confirm = lambda n: (asked.append(n), True)[1]
    click(win, "delete", versions[1])  # the second regeneration alone
    assert asked == [1] and win.flow.conversation.messages[-1].version() in ((1, 2), (2, 2))
    win.close()

    again = make_window()  # a restart: everything is there
    again.history.open(original)
    conv = again.flow.conversation
    assert [m.content for m in conv.messages][:3] == [*five[:2], "Question number two, edited?"]
    with Store.open() as s:
        stored = s.get_conversation(original)
        assert len(stored.alternatives(stored.messages[2])) == 2
        assert len(stored.alternatives(stored.messages[3])) == 2
        assert len(stored.tree) == 10 + 2 + 1  # five turns, the edit's turn, one regeneration kept
    click(again, "show", q2.id)
    assert [m.content for m in again.flow.conversation.messages] == five


def test_a_rewritten_reply_is_kept_beside_the_models_marked_edited(qtbot, make_window):
    win = make_window(small_config(max_tokens=4))
    reply = ask(qtbot, win, "Say hello.")
    win.branches.rewrite = lambda text: ("Hello, rewritten by hand.", True)
    click(win, "edit", reply.id)
    mine = win.flow.conversation.messages[-1]
    assert mine.content == "Hello, rewritten by hand." and mine.edited and mine.version() == (2, 2)
    assert "edited" in win.view.toPlainText()
    click(win, "show", reply.id)
    assert win.flow.conversation.messages[-1].content == reply.content, "the model's is kept"
    assert len(win.flow.conversation.messages) == 2
