"""The Presets button beside the system prompt: start a chat from a preset, save one, delete one.

A preset (app.chat.presets) is a conversation's setup under a name: its
system prompt, reply format and tools, and the window's sampling settings.
Picking one sets up the conversation on screen when it is still empty (no
message yet: a new chat): the system prompt field, the reply format and tools
choosers (which hand them to the chat flow, as a choice of the user's would),
and the settings' sampling values, saved like a change in the Settings
dialog and used from the next reply on.

A conversation that already has messages is never changed by a preset: its
replies so far were written under its own prompt and settings, and a preset
laid over them would make its history read as something it was not. Picking
one there starts a new chat set up from the preset instead (New chat, then
the preset), and the conversation left is kept in the history as it was; the
menu says so before the click ("Start a new chat with:"), and the message bar
after it.

"Save as preset…" asks for a name, showing what will be saved; a name that
is taken (without regard to case) turns the button into Replace, so saving
over a preset is always said and chosen. Delete takes a preset out at once,
with Undo in the message bar. The file is read afresh each time the menu
opens, so a hand edit shows at once, and what in it could not be used is said
once in the message bar (the file is copied aside before it is next saved).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from app.chat.presets import (
    Preset,
    PresetError,
    PresetStore,
    check_name,
    make_preset,
    name_key,
    sampling_of,
)
from app.config import AppConfig
from app.ui.chat.flow import ChatFlow
from app.ui.chat.reply_format import ReplyFormatChooser
from app.ui.chat.tools_chooser import ToolsChooser
from app.ui.widgets.menu_button import MenuButton
from app.ui.widgets.message_bar import MessageBar
from app.ui.widgets.one_line import OneLineLabel

UNDO_KEY = "undo-preset-delete"  # the message bar's action after a delete
BUTTON_TEXT = "Presets"
# One short word and no label, never the preset's name: the system prompt beside it needs the
# room more. The preset in use is in bold in the menu, in the tooltip, and offered again by
# "Save as preset…".


class PresetNameDialog(QDialog):
    """The name for "Save as preset…", with what will be saved; a taken name makes OK Replace."""

    def __init__(self, preview: Preset, taken: Callable[[str], str | None], name: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle("Save as preset — LlamaDesk")
        self._taken = taken
        self.result_name: str | None = None  # set on OK
        self.replacing = False  # True when OK saves over the preset of that name
        hint = QLabel("Saves this conversation's setup under a name, to start new chats from:")
        hint.setWordWrap(True)
        self.what = QLabel("\n".join(preview.summary()))
        self.what.setWordWrap(True)
        self.edit = QLineEdit(name)
        self.edit.setPlaceholderText("Name, e.g. Python reviewer")
        self.edit.selectAll()
        self.note = OneLineLabel()  # a taken name, or why this one cannot be used
        std = QDialogButtonBox.StandardButton
        self.buttons = QDialogButtonBox(std.Ok | std.Cancel)
        self.ok = self.buttons.button(std.Ok)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.edit.textChanged.connect(self._on_text)
        row = QHBoxLayout()
        row.addWidget(QLabel("Name"))
        row.addWidget(self.edit, 1)
        col = QVBoxLayout(self)
        col.addWidget(hint)
        col.addWidget(self.what)
        col.addLayout(row)
        col.addWidget(self.note)
        col.addWidget(self.buttons)
        self.resize(480, self.sizeHint().height())
        self._on_text(name)

    def _on_text(self, text: str) -> None:
        existing = self._taken(text) if text.strip() else None
        self.ok.setText("Replace" if existing else "Save")
        self.note.set_level("")
        self.note.set_line(f"A preset named «{existing}» exists: Replace saves over it." if existing else "")

    def accept(self) -> None:
        try:
            name = check_name(self.edit.text())
        except PresetError as e:
            self.note.set_level("error")
            self.note.set_line(f"{str(e)[:1].upper()}{str(e)[1:]}.")
            return
        self.result_name = name
        self.replacing = self._taken(name) is not None
        super().accept()


class PresetsMenu(QWidget):
    applied = Signal(object)  # the Preset just applied
    saved = Signal(object)  # the Preset just saved

    def __init__(self, store: PresetStore, flow: ChatFlow, system_prompt: QLineEdit,
                 reply_format: ReplyFormatChooser, tools: ToolsChooser, bar: MessageBar, *,
                 config: Callable[[], AppConfig], apply_settings: Callable[[AppConfig], object],
                 new_chat: Callable[[], None], parent=None):
        super().__init__(parent)
        self.store, self.flow, self.bar = store, flow, bar
        self.system_prompt, self.reply_format, self.tools = system_prompt, reply_format, tools
        self.config, self.apply_settings, self.new_chat = config, apply_settings, new_chat
        self.current: str | None = None  # the preset the conversation on screen was set up from
        self.dialog: PresetNameDialog | None = None  # open while a name is being chosen (tests)
        self.preset_actions: dict[str, QAction] = {}  # the menu's presets, by name (tests)
        self._deleted: Preset | None = None  # the last one deleted, for Undo
        self._said: str | None = None  # the file's problems as last said in the bar
        self.button = MenuButton(BUTTON_TEXT)
        self.menu = QMenu(self)
        self.menu.setToolTipsVisible(True)
        self.menu.aboutToShow.connect(self.refresh)
        self.button.setMenu(self.menu)
        self.save_action = QAction("Save as preset…", self)  # the menu's own, kept through refresh
        self.save_action.setToolTip("This conversation's system prompt, reply format and tools, and "
                                    "the sampling settings, under a name")
        self.save_action.triggered.connect(self.save_as)
        self.delete_menu = QMenu("Delete preset", self)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        flow.conversation_changed.connect(lambda _c: self._show_current(None))
        bar.action_triggered.connect(self._on_bar_action)
        self._show_current(None)

    # -- the menu ---------------------------------------------------------------
    def refresh(self) -> list[Preset]:
        """Build the menu from the file as it is now; say once what in it cannot be used."""
        load = self.store.read()
        message = load.message()
        if message and message != self._said:
            self.bar.show_message(message, "warning")
        self._said = message
        self.menu.clear()
        self.delete_menu.clear()
        self.preset_actions = {}
        head = self.menu.addAction("Start a new chat with:" if self.flow.conversation.messages
                                   else "Set up this chat with:")
        head.setEnabled(False)
        for p in load.presets:
            a = self.menu.addAction(p.name)
            a.setToolTip("\n".join(p.summary()))
            # The current one in bold, not checked: Fusion's empty check boxes read as options.
            if self.current and name_key(p.name) == name_key(self.current):
                font = a.font()
                font.setBold(True)
                a.setFont(font)
            a.triggered.connect(lambda _on=False, p=p: self.apply(p))
            self.preset_actions[p.name] = a
            d = self.delete_menu.addAction(p.name)
            d.triggered.connect(lambda _on=False, name=p.name: self.delete(name))
        if not load.presets:
            self.menu.addAction("No presets yet").setEnabled(False)
        self.menu.addSeparator()
        self.menu.addAction(self.save_action)
        self.delete_menu.setEnabled(bool(load.presets))
        self.menu.addMenu(self.delete_menu)
        return load.presets

    def _show_current(self, name: str | None) -> None:
        self.current = name
        self.button.setToolTip(f"This conversation was set up from the preset «{name}»; the menu "
                               "starts another chat from a preset, or saves this one's setup"
                               if name else "Start a chat from a saved preset (system prompt, "
                               "reply format, tools, sampling), or save this one's setup as a preset")

    # -- applying -----------------------------------------------------------------
    def apply(self, preset: Preset) -> None:
        """Set up the conversation on screen from `preset`; one that has messages is left as it
        is and a new chat is started with the preset (see the module's docstring)."""
        started = bool(self.flow.conversation.messages)
        if started:
            self.new_chat()
        self.system_prompt.setText(preset.system_prompt)
        self.system_prompt.setCursorPosition(0)  # its start in view, not its last words
        self.reply_format.choose(preset.reply_format)
        self.tools.choose(preset.tools)
        cfg = self.config()
        tuned = replace(cfg, **preset.sampling)
        if tuned != cfg:
            self.apply_settings(tuned)
        self._show_current(preset.name)
        where = "a new chat (the last one is kept in the history)" if started else "this chat"
        sampling = preset.sampling_text()
        tools = "none" if not preset.tools.definitions() else preset.tools.label()
        self.bar.show_message(f"Preset «{preset.name}» set up {where} — reply format: "
                              f"{preset.reply_format.label()} · tools: {tools}"
                              + (f" · sampling (now in Settings): {sampling}" if sampling else ""), "info")
        self.applied.emit(preset)

    # -- saving and deleting ------------------------------------------------------
    def preview(self, name: str = "") -> Preset:
        """The conversation on screen and the settings, as a preset named `name` (unchecked)."""
        conv = self.flow.conversation
        return Preset(name, conv.system_prompt, sampling_of(self.config()), conv.reply_format, conv.tools)

    def save_as(self) -> None:
        """Ask for a name (the current preset's offered, to save it again), then save."""
        def taken(text: str) -> str | None:
            try:
                found = self.store.find(check_name(text))
            except PresetError:
                return None
            return found.name if found else None

        self.dialog = PresetNameDialog(self.preview(), taken, self.current or "", self)
        self.dialog.finished.connect(self._on_dialog_done)
        self.dialog.open()

    def _on_dialog_done(self, _result: int) -> None:
        dlg, self.dialog = self.dialog, None
        if dlg is None:
            return
        dlg.deleteLater()
        if dlg.result_name is not None:
            self.save(dlg.result_name, replace=dlg.replacing)

    def save(self, name: str, replace: bool = False) -> Preset | None:
        """Save the conversation's setup as `name`; what goes wrong is said in the bar (None)."""
        p = self.preview(name)
        try:
            preset = make_preset(name, p.system_prompt, p.sampling, p.reply_format, p.tools)
            kept = self.store.save(preset, replace=replace)
        except PresetError as e:
            self.bar.show_message(f"Could not save the preset: {e}", "warning")
            return None
        self._show_current(preset.name)
        said = f"{'Replaced' if replace else 'Saved'} preset «{preset.name}»"
        if kept is not None:
            said += f"; the old presets file, with what could not be used, is kept as {kept}"
        self.bar.show_message(said, "info")
        self.saved.emit(preset)
        return preset

    def delete(self, name: str) -> bool:
        try:
            gone, kept = self.store.delete(name)
        except PresetError as e:
            self.bar.show_message(f"Could not delete the preset: {e}", "warning")
            return False
        if gone is None:
            self.bar.show_message(f"There is no preset named «{name}»", "warning")
            return False
        self._deleted = gone
        if self.current == gone.name:
            self._show_current(None)
        said = f"Deleted preset «{gone.name}»"
        if kept is not None:
            said += f"; the old presets file is kept as {kept}"
        self.bar.show_message(said, "info", action="Undo", key=UNDO_KEY)
        return True

    def _on_bar_action(self, key: str) -> None:
        if key != UNDO_KEY or self._deleted is None:
            return
        back, self._deleted = self._deleted, None
        try:
            self.store.save(back)
        except PresetError as e:
            self.bar.show_message(f"Could not bring «{back.name}» back: {e}", "warning")
            return
        self.bar.show_message(f"Preset «{back.name}» is back", "info")
