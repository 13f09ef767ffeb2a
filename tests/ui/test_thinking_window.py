"""A thinking model in the real window: the bundled model's GGUF given a DeepSeek-R1
distill's chat template, whose generation prompt opens `<think>`, so its replies start in
reasoning; a thinking budget ends the reasoning (the base model never closes it itself) and the
answer follows. The block streams live, folds when the answer starts, the reply keeps its
reasoning apart (view, store, reopened conversation), and a reply stopped while it thinks keeps
what it thought."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.history.store import Store
from app.ui.chat.thinking import CLOSED, OPENED
from tests.gguf_templates import with_chat_template
from tests.ui.conftest import small_config

TEMPLATES = Path(__file__).parent.parent / "data" / "templates"


def _copy(tmp_path_factory, model_path, template: str) -> Path:
    out = tmp_path_factory.mktemp("thinking-window") / f"gemma-as-{template}.gguf"
    return with_chat_template(model_path, out, (TEMPLATES / f"{template}.jinja").read_text())


@pytest.fixture(scope="module")
def r1(tmp_path_factory, model_path) -> Path:
    return _copy(tmp_path_factory, model_path, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory, model_path) -> Path:
    return _copy(tmp_path_factory, model_path, "Qwen-Qwen3-0.6B")


def think(win, budget: int) -> None:
    """Thinking on with a budget the chooser does not offer (its smallest is 256 tokens, more
    than a test's reply): set on the conversation, as the chooser sets it."""
    win.flow.conversation.think, win.flow.conversation.think_budget = True, budget


def test_a_thinking_reply_streams_folds_and_keeps_its_reasoning_apart(qtbot, make_window, r1):
    win = make_window(small_config(max_tokens=48), model=str(r1))
    think(win, 12)
    seen: list[str] = []
    win.flow.reply_started.connect(lambda: seen.clear())
    win.composer.set_text("What is the capital of France?")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: "Thinking…" in win.view.toPlainText(), timeout=60_000)
        seen.append(win.view.toPlainText())
        if win.flow.gauges.t_answer is None:  # still thinking: the status shows the budget's fill
            qtbot.waitUntil(lambda: "of its budget" in win.gauges.phase.text() or
                            win.flow.gauges.t_answer is not None, timeout=5_000)
            assert win.flow.gauges.t_answer is not None or "/12 of its budget)" in win.gauges.phase.text()
        qtbot.waitUntil(lambda: "Thought for" in win.view.toPlainText() or not win.flow.busy,
                        timeout=60_000)
        seen.append(win.view.toPlainText())
    msg = done.args[0]
    assert msg.reasoning and msg.stats.reasoning_tokens is not None
    assert msg.stats.reasoning_tokens >= 12  # the budget's count, then its message and the end
    assert "<think>" not in msg.content and "</think>" not in msg.content
    assert msg.stats.ttfa_s is not None and msg.stats.ttft_s is not None
    assert msg.stats.ttft_s <= msg.stats.ttfa_s
    live_thinking, folded = seen
    assert "Thinking…" in live_thinking
    assert "Thought for" in folded or not folded  # folded when the answer began (unless it ended first)

    text = win.view.toPlainText()
    assert f"{CLOSED} {msg.stats.thought()}" in text and msg.reasoning.strip()[:20] not in text
    index = len(win.flow.conversation.messages) - 1
    win.view.toggle_thinking(index)
    assert f"{OPENED} {msg.stats.thought()}" in win.view.toPlainText()
    assert msg.reasoning.strip().splitlines()[0][:20] in win.view.toPlainText()
    assert "first answer" in text and f"thought {msg.stats.reasoning_tokens} tok" in text
    assert f"thought {msg.stats.reasoning_tokens} tok" in win.gauges.turn_text.text()

    with Store.open() as s:  # the store keeps it apart from the answer
        row = s.get_conversation(win.flow.conversation.id).messages[-1]
    assert row.reasoning == msg.reasoning and row.content == msg.content
    conv_id = win.flow.conversation.id
    win.close()

    again = make_window(model=str(r1))  # a restart: the reply opens folded, its reasoning kept
    again.history.open(conv_id)
    reopened = again.flow.conversation.messages[-1]
    assert reopened.reasoning == msg.reasoning and reopened.content == msg.content
    assert f"{CLOSED} {msg.stats.thought()}" in again.view.toPlainText()


def test_a_reply_stopped_while_it_thinks_keeps_its_reasoning(qtbot, make_window, r1):
    win = make_window(small_config(max_tokens=400), model=str(r1))
    think(win, 10_000)  # thinks to the end
    win.composer.set_text("Think about the sea.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: win.flow.gauges.reasoning_tokens >= 4, timeout=60_000)
        win.flow.stop()
    msg = done.args[0]
    assert msg.reasoning and msg.content == "" and msg.stats.stop_reason == "cancelled"
    with Store.open() as s:
        row = s.get_conversation(win.flow.conversation.id).messages[-1]
    assert row.role == "assistant" and row.reasoning == msg.reasoning


def test_the_thinking_chooser_offers_the_templates_own_switches_only_for_a_thinking_model(
        qtbot, make_window, qwen3, r1, model_path):
    win = make_window(small_config(), model=str(qwen3))
    chooser = win.thinking
    assert chooser.isVisible() and chooser.controls.format == "think-tags" and chooser.controls.switch
    assert [a.text() for a in chooser.menu.actions() if a.text()] == [
        "As the model does (on)", "On", "Off", "No budget", "Budget: 256 tokens",
        "Budget: 1,024 tokens", "Budget: 4,096 tokens"]
    chooser.modes[False].trigger()
    chooser.budgets[256].trigger()
    s = win.flow.turn_settings()
    assert (s.think, s.think_budget) == (False, 256) and chooser.button.text() == "off · 256 tok"
    win.flow.new_chat()  # a new conversation thinks as the model does again
    assert chooser.modes[None].isChecked() and win.flow.turn_settings().think is None
    win.close()

    # llama.cpp's copy of the R1 distill's template closes the reasoning unless enable_thinking
    # is set: its default is off, and the chooser says so.
    r1_win = make_window(small_config(), model=str(r1))
    assert [a.text() for a in r1_win.thinking.menu.actions() if a.text()][:4] == [
        "As the model does (off)", "On", "Off", "No budget"]
    r1_win.close()

    plain = make_window(small_config(), model=str(model_path))  # no chat template: no thinking
    assert not plain.thinking.isVisible() and plain.thinking.controls is None
