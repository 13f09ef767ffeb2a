"""A thinking model's reasoning in the transcript: it streams under its clock, folds to one line
when the answer starts, and a finished reply's block opens and folds again on a click.

Real ChatView widgets offscreen; the reply's words are given, the view's drawing is what is tested.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl

from app.chat.conversation import LiveMessage
from app.ui.chat.thinking import CLOSED, OPENED, LiveThinking
from app.ui.chat.view import ChatView
from tests.ui.conftest import reply_stats

REASONING = "The user wants a colour.\nBlue is common; pick blue."
ANSWER = "Blue."


@pytest.fixture
def view(qtbot):
    v = ChatView()
    qtbot.addWidget(v)
    v.resize(640, 700)
    v.show()
    v.add_message(LiveMessage("user", "Name a colour."))
    return v


def test_the_reasoning_streams_under_its_clock_then_folds_when_the_answer_starts(view):
    view.begin_live("waiting for the first token… 0.0 s")
    think = LiveThinking()
    think.feed_reasoning(REASONING[:10], 1.0, 3)
    view.live_think(think.clock(1.5), think.unpainted())
    text = view.toPlainText()
    assert "Thinking… 0.5 s" in text and REASONING[:10] in text and "waiting for" not in text
    think.feed_reasoning(REASONING[10:], 2.0, 12)
    view.live_think(think.clock(3.2), think.unpainted())
    text = view.toPlainText()
    assert "Thinking… 2.2 s" in text and "Thinking… 0.5 s" not in text  # the clock is rewritten
    assert "Blue is common; pick blue." in text and text.count("The user wants") == 1
    view.live_status("waiting for the first token… 3.3 s")  # the gauges' timer: no effect now
    assert "waiting for" not in view.toPlainText()

    think.feed_answer(4.4)
    view.fold_thinking(think.folded_line())
    view.live_append(ANSWER)
    text = view.toPlainText()
    assert f"{CLOSED} Thought for 3.4 s · 12 tokens" in text
    assert "The user wants" not in text and text.rstrip().endswith(ANSWER)


def test_a_finished_reply_shows_its_reasoning_folded_and_a_click_opens_and_folds_it(view):
    stats = reply_stats(reasoning_tokens=12, reasoning_s=3.4, ttfa_s=3.5)
    msg = LiveMessage("assistant", ANSWER, stats=stats, reasoning=REASONING)
    view.add_message(msg)
    folded = view.toPlainText()
    assert f"{CLOSED} Thought for 3.4 s · 12 tokens" in folded and "The user wants" not in folded
    assert "first answer 3500 ms" in folded and "thought 12 tok" in folded  # the footer, as TTFT is said
    view.anchorClicked.emit(QUrl("msg:think/1"))
    opened = view.toPlainText()
    assert f"{OPENED} Thought for 3.4 s" in opened and "Blue is common; pick blue." in opened
    assert opened.index("Blue is common") < opened.rindex(ANSWER)  # the thinking above the answer
    view.anchorClicked.emit(QUrl("msg:think/1"))
    assert view.toPlainText() == folded


def test_a_reply_without_reasoning_has_no_block(view):
    view.add_message(LiveMessage("assistant", ANSWER, stats=reply_stats()))
    text = view.toPlainText()
    assert "Thought" not in text and "first answer" not in text
