"""Tools in the real window: the chooser and its dialog, a built-in tool called, run and answered on
the real model, the call drawn as a card and the result as its own block, a declared tool's result
entered by the user, and the tools saved with the conversation (real SQLite under the test's XDG dir)."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QDialogButtonBox

from app.chat.tool_set import MAX_ROUNDS, ToolSet, declared_tools, make_tool_set
from app.history.store import Store
from app.ui.chat.tools_chooser import ToolsChooser
from tests.ui.conftest import small_config

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "today's weather in a city",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                   "properties": {"city": {"type": "string", "maxLength": 12}}}}}]


def until_answered(qtbot, win, timeout: int = 120_000) -> None:
    """Wait for the turn's last reply: not busy, and no call left to run or answer."""
    qtbot.waitUntil(lambda: not win.flow.busy and win.flow.conversation.messages
                    and win.flow.conversation.messages[-1].role == "assistant"
                    and not win.flow.conversation.messages[-1].tool_calls, timeout=timeout)


def test_the_chooser_makes_tool_sets_and_refuses_bad_definitions_in_one_line(qtbot):
    chooser = ToolsChooser()
    qtbot.addWidget(chooser)
    chooser.show()
    picked: list[ToolSet] = []
    chooser.chosen.connect(picked.append)
    assert chooser.button.text() == "No tools"
    chooser.builtin["calculator"].setChecked(True)
    assert picked[-1] == make_tool_set(["calculator"], ()) and chooser.button.text() == "calculator"
    chooser.choices["required"].setChecked(True)
    assert picked[-1].choice == "required" and chooser.button.text() == "calculator (required)"
    chooser.edit_declared()
    dlg = chooser.dialog
    dlg.edit.setPlainText('[{"type": "function", "function": {"name": ""}}]')
    ok = dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
    ok.click()
    assert dlg.isVisible() and "function.name must be a name" in dlg.error.full_text()
    dlg.edit.setPlainText(json.dumps(WEATHER))
    ok.click()
    assert not dlg.isVisible()
    assert picked[-1].declared == declared_tools(WEATHER) and picked[-1].builtin == ("calculator",)
    assert chooser.declare.text() == "Declared tools (1)…"
    n = len(picked)
    chooser.show_tools(ToolSet())  # the conversation's, shown: not a choice
    assert len(picked) == n and not chooser.builtin["calculator"].isChecked()


def test_a_builtin_call_runs_and_is_drawn_as_a_card_with_its_result(qtbot, make_window):
    win = make_window(small_config(max_tokens=40))
    win.tools.choose(make_tool_set(["calculator"], (), "calculator"))
    win.composer.set_text("What is 17 times 23?")
    assert win.flow.send()
    until_answered(qtbot, win)
    msgs = win.flow.conversation.messages
    assert [m.role for m in msgs[:3]] == ["user", "assistant", "tool"]
    call = msgs[1].tool_calls[0]
    assert call.name == "calculator" and msgs[2].tool_name == "calculator" and msgs[2].content
    shown = win.view.toPlainText().replace("\xa0", " ")
    assert "Tool call · calculator" in shown and "· calls a tool" in shown
    assert '  "expression": ' in shown  # the arguments pretty-printed in their JSON box
    assert "Tool result" in shown and "Result of calculator" in shown and msgs[2].content in shown
    assert '{"tool_calls"' not in shown and '"arguments"' not in shown  # never the tool format's text
    cid = win.flow.conversation.id
    with Store.open() as s:
        conv = s.get_conversation(cid)
    assert [m.role for m in conv.messages] == [m.role for m in msgs]
    assert conv.messages[1].tool_calls == (call,) and conv.tools["builtin"] == ["calculator"]

    win.new_chat()
    assert win.tools.button.text() == "No tools"
    win.history.open(cid)
    assert win.tools.tools.builtin == ("calculator",) and win.tools.button.text() == "calculator (calculator)"
    assert "Result of calculator" in win.view.toPlainText()  # reopened, drawn the same way


def test_a_declared_tools_result_is_entered_by_the_user_and_answered(qtbot, make_window):
    win = make_window(small_config(max_tokens=32))
    win.tools.choose(make_tool_set([], declared_tools(WEATHER), "required"))
    win.composer.set_text("Weather in Paris?")
    with qtbot.waitSignal(win.flow.tool_waiting, timeout=120_000,
                          check_params_cb=lambda calls: bool(calls)):
        win.flow.send()
    assert win.tool_result.isVisible() and "get_weather" in win.tool_result.title.text()
    assert not win.flow.busy and win.flow.conversation.messages[-1].tool_calls
    sent = 0
    for _ in range(MAX_ROUNDS):  # the model may call again; the loop's last reply must be text
        win.tool_result.edit.setPlainText("Sunny, 24 °C")
        n = len(win.flow.conversation.messages)
        win.tool_result.send_button.click()
        sent += 1
        qtbot.waitUntil(lambda n=n: not win.flow.busy and len(win.flow.conversation.messages) >= n + 2
                        and win.flow.conversation.messages[-1].role == "assistant", timeout=120_000)
        if not win.tool_result.isVisible():
            break
    until_answered(qtbot, win, timeout=10_000)
    assert not win.tool_result.isVisible() and win.flow.conversation.messages[-1].content
    tools = [m for m in win.flow.conversation.messages if m.role == "tool"]
    assert [(t.content, t.tool_name) for t in tools] == [("Sunny, 24 °C", "get_weather")] * sent
    with Store.open() as s:
        stored = s.get_conversation(win.flow.conversation.id)
    assert [m.content for m in stored.messages if m.role == "tool"] == ["Sunny, 24 °C"] * sent
