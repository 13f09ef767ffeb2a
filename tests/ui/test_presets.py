"""Presets in the real window (no model loaded: nothing here decodes): a preset saved from a
conversation and its settings, picked for a new chat; a conversation with messages left as it
was; a taken name replaced only when said; delete and Undo; a damaged file said and kept."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.chat.presets import PresetStore, make_preset
from app.chat.reply_format import ANY_JSON, TEXT, ReplyFormat
from app.chat.tool_set import ToolSet, make_tool_set
from app.config import read_config
from app.ui.chat.presets_menu import UNDO_KEY
from tests.ui.conftest import seed, small_config


@pytest.fixture
def window(qtbot):
    from app.ui.window import MainWindow

    win = MainWindow(config=small_config(), autoload=False)  # settings saved to the test's XDG dir
    qtbot.addWidget(win)
    win.show()
    yield win
    win.close()


def menu_texts(win) -> list[str]:
    win.presets.refresh()  # what opening the menu does
    return [a.text() for a in win.presets.menu.actions() if not a.isSeparator()]


def save_through_dialog(win, name: str):
    win.presets.save_as()
    dlg = win.presets.dialog
    assert dlg is not None and dlg.isVisible()
    dlg.edit.setText(name)
    return dlg


def test_a_preset_saved_from_a_chat_sets_up_a_new_chat_its_choosers_and_the_settings(qtbot, window):
    win = window
    assert win.presets.current is None and "No presets yet" in menu_texts(win)
    win.system_prompt.setText("You answer in JSON, tersely.")
    win.reply_format.choose(ReplyFormat(ANY_JSON))
    win.tools.choose(make_tool_set(["calculator"], ()))
    win.apply_settings(replace(win.config, temperature=0.3, top_k=17, seed=42, max_tokens=33))
    dlg = save_through_dialog(win, "Terse JSON")
    shown = dlg.what.text()  # what will be saved, before it is
    assert "System prompt: You answer in JSON, tersely." in shown and "Reply format: Any JSON" in shown
    assert "Tools: calculator" in shown and "temperature 0.3" in shown and "seed 42" in shown
    assert dlg.ok.text() == "Save" and not dlg.note.isVisible()
    with qtbot.waitSignal(win.presets.saved) as saved:
        dlg.ok.click()
    assert not dlg.isVisible() and saved.args[0].name == "Terse JSON"
    assert win.presets.current == "Terse JSON" and "«Terse JSON»" in win.presets.button.toolTip()
    assert "Saved preset «Terse JSON»" in win.bar.text()
    stored = PresetStore().find("terse json")
    assert stored is not None and stored.system_prompt == "You answer in JSON, tersely."
    assert stored.sampling["temperature"] == 0.3 and stored.sampling["top_k"] == 17
    assert stored.reply_format.mode == ANY_JSON and stored.tools.builtin == ("calculator",)

    win.new_chat()
    win.apply_settings(replace(win.config, temperature=0.9, top_k=40, seed=-1, max_tokens=24))
    assert win.system_prompt.text() == "" and win.reply_format.combo.currentText() == "Text"
    assert win.tools.button.text() == "No tools" and win.presets.current is None
    assert "«" not in win.presets.button.toolTip(), "a new chat was set up from no preset"
    assert menu_texts(win)[:2] == ["Set up this chat with:", "Terse JSON"]
    empty = win.flow.conversation
    with qtbot.waitSignal(win.presets.applied):
        win.presets.preset_actions["Terse JSON"].trigger()
    assert win.flow.conversation is empty, "an empty chat is set up, not replaced"
    assert win.system_prompt.text() == "You answer in JSON, tersely."
    assert empty.system_prompt == "You answer in JSON, tersely."
    assert win.reply_format.combo.currentText() == "Any JSON" and empty.reply_format.mode == ANY_JSON
    assert win.tools.button.text() == "calculator" and empty.tools.builtin == ("calculator",)
    assert win.tools.builtin["calculator"].isChecked()
    cfg = win.config
    assert (cfg.temperature, cfg.top_k, cfg.seed, cfg.max_tokens) == (0.3, 17, 42, 33)
    assert win.flow.settings_source().temperature == 0.3, "the next reply uses them"
    saved_cfg = read_config().config
    assert (saved_cfg.temperature, saved_cfg.top_k, saved_cfg.seed) == (0.3, 17, 42), "saved like Settings"
    assert win.presets.current == "Terse JSON" and "«Terse JSON»" in win.presets.button.toolTip()
    assert "Preset «Terse JSON» set up this chat" in win.bar.text()
    assert win.presets.refresh() and win.presets.preset_actions["Terse JSON"].font().bold()


def test_a_conversation_with_messages_is_left_as_it_was_and_a_new_chat_gets_the_preset(qtbot, window):
    win = window
    PresetStore().save(make_preset("Pirate", "Talk like a pirate.", {"temperature": 1.2}))
    cid = seed("What is a comet?", "A ball of ice.")
    assert win.history.open(cid)
    old = win.flow.conversation
    assert old.id == cid and old.messages and win.system_prompt.text() == ""
    assert menu_texts(win)[0] == "Start a new chat with:", "the menu says what a pick will do"
    win.presets.preset_actions["Pirate"].trigger()
    new = win.flow.conversation
    assert new is not old and new.messages == [] and new.id is None
    assert new.system_prompt == "Talk like a pirate." and win.system_prompt.text() == "Talk like a pirate."
    assert old.system_prompt == "" and old.reply_format.mode == TEXT and old.tools == ToolSet()
    assert win.config.temperature == 1.2
    assert "set up a new chat (the last one is kept in the history)" in win.bar.text()
    assert win.history.open(cid) and win.system_prompt.text() == "", "the stored one is unchanged"
    assert win.presets.current is None, "the one opened was not set up from a preset"


def test_a_taken_name_turns_save_into_replace_and_a_bad_name_keeps_the_dialog_open(qtbot, window):
    win = window
    PresetStore().save(make_preset("Coder", "old prompt", {"top_k": 3}))
    win.system_prompt.setText("new prompt")
    dlg = save_through_dialog(win, "   ")
    dlg.ok.click()
    assert dlg.isVisible() and "needs a name" in dlg.note.full_text()
    dlg.edit.setText("x" * 61)
    dlg.ok.click()
    assert dlg.isVisible() and "at most 60 characters" in dlg.note.full_text()
    dlg.edit.setText("  coder ")
    assert dlg.ok.text() == "Replace" and "«Coder» exists" in dlg.note.full_text() and dlg.note.isVisible()
    dlg.edit.setText("coder 2")
    assert dlg.ok.text() == "Save" and not dlg.note.isVisible()
    dlg.edit.setText("CODER")
    dlg.ok.click()
    assert not dlg.isVisible() and "Replaced preset «CODER»" in win.bar.text()
    got = PresetStore().presets()
    assert [p.name for p in got] == ["CODER"] and got[0].system_prompt == "new prompt"
    assert got[0].sampling["top_k"] == win.config.top_k, "the window's settings, not the old preset's"
    save_through_dialog(win, "Never saved").reject()
    assert [p.name for p in PresetStore().presets()] == ["CODER"], "Cancel saves nothing"


def test_delete_takes_a_preset_out_at_once_and_undo_brings_it_back(qtbot, window):
    win = window
    store = PresetStore()
    store.save(make_preset("Keep"))
    store.save(make_preset("Drop", "to go", {"temperature": 0.1}))
    menu_texts(win)
    assert [a.text() for a in win.presets.delete_menu.actions()] == ["Keep", "Drop"]
    next(a for a in win.presets.delete_menu.actions() if a.text() == "Drop").trigger()
    assert [p.name for p in store.presets()] == ["Keep"]
    assert "Deleted preset «Drop»" in win.bar.text() and win.bar.action.text() == "Undo"
    assert "Drop" not in menu_texts(win)
    win.bar.action_triggered.emit(UNDO_KEY)
    back = store.find("Drop")
    assert back is not None and back.system_prompt == "to go" and back.sampling == {"temperature": 0.1}
    assert "is back" in win.bar.text()


def test_a_damaged_file_is_said_once_in_the_bar_and_kept_aside_before_a_save(qtbot, window):
    win = window
    store = PresetStore()
    good = make_preset("Fine", "ok").to_json()
    store.path.write_text('{"presets": [' + json.dumps(good)
                          + ', {"name": "Too hot", "sampling": {"temperature": -1}}]}')
    original = store.path.read_bytes()
    texts = menu_texts(win)
    assert "Fine" in texts and "Too hot" not in texts, "the good one is kept, the bad one skipped"
    line = win.bar.text()
    assert "«Too hot» skipped (temperature must be >= 0" in line and win.bar.level == "warning"
    win.bar.hide()
    menu_texts(win)
    assert win.bar.text() == "", "said once, not each time the menu opens"
    preset = win.presets.save("Another")
    assert preset is not None
    copies = [p for p in store.path.parent.iterdir() if ".unusable-" in p.name]
    assert len(copies) == 1 and copies[0].read_bytes() == original and str(copies[0]) in win.bar.text()
    assert [p.name for p in store.presets()] == ["Fine", "Another"]
