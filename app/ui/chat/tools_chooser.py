"""The conversation's tools beside its reply format: LlamaDesk's own, declared ones, and the choice.

A button with a menu: each built-in tool checked on or off, "Declare tools…"
for the user's own function definitions, and whether the model decides (Auto),
must call (Required) or may not (None). It shows the tools of the conversation
on screen and hands a change to the chat flow, which saves it with the
conversation at once, as the reply format chooser does.

The button is a push button with a menu, not a tool button: Fusion draws a
tool button's menu arrow over its last letters ("No tools" ran into it) and
leaves no room for it in its size, where a push button's size makes room for
the arrow (app.ui.widgets.menu_button). A label longer than the button's width
is cut with an ellipsis before the arrow, the whole in its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QWidget

from app.chat import builtin_tools
from app.chat.conversation import LiveConversation
from app.chat.tool_set import ToolSet, ToolSetError, make_tool_set
from app.ui.chat.flow import ChatFlow
from app.ui.chat.tools_dialog import ToolsDialog
from app.ui.widgets.menu_button import MenuButton  # here too for the presets chooser

BUILTIN_LABELS = {builtin_tools.CALCULATOR: "Calculator", builtin_tools.CLOCK: "Current time"}
CHOICE_LABELS = {"auto": "Auto: the model decides", "required": "Required: its first reply calls a tool",
                 "none": "None: no calls"}
MAX_WIDTH = 220


class ToolsChooser(QWidget):
    chosen = Signal(object)  # the ToolSet the user made

    def __init__(self, parent=None):
        super().__init__(parent)
        self.tools = ToolSet()
        self.button = MenuButton()
        self.button.setMaximumWidth(MAX_WIDTH)
        self.menu = QMenu(self)
        self.builtin: dict[str, QAction] = {}
        for name, label in BUILTIN_LABELS.items():
            a = self.menu.addAction(label)
            a.setCheckable(True)
            a.setToolTip(builtin_tools.DEFINITIONS[name]["function"]["description"])
            a.toggled.connect(self._changed)
            self.builtin[name] = a
        self.menu.setToolTipsVisible(True)
        self.declare = self.menu.addAction("Declare tools…")
        self.declare.triggered.connect(self.edit_declared)
        self.menu.addSeparator()
        group = QActionGroup(self)
        self.choices: dict[str, QAction] = {}
        for key, label in CHOICE_LABELS.items():
            a = self.menu.addAction(label)
            a.setCheckable(True)
            group.addAction(a)
            a.toggled.connect(self._changed)
            self.choices[key] = a
        self.button.setMenu(self.menu)
        self.dialog: ToolsDialog | None = None  # open while tools are being declared (tests)
        self._showing = False
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Tools"))
        row.addWidget(self.button)
        self.show_tools(ToolSet())

    def show_tools(self, tools: ToolSet) -> None:
        """Show `tools` (the conversation's) without announcing it as a choice."""
        self._showing = True
        try:
            self.tools = tools
            for name, a in self.builtin.items():
                a.setChecked(name in tools.builtin)
            choice = tools.choice if tools.choice in self.choices else "required"
            self.choices[choice].setChecked(True)
            n = len(tools.declared)
            self.declare.setText(f"Declared tools ({n})…" if n else "Declare tools…")
            self.button.setText(tools.label())
            names = [*tools.builtin, *(d["function"]["name"] for d in tools.declared)]
            self.button.setToolTip(f"{tools.label()}: the tools this conversation's replies may call "
                                   "(saved with it): " + (", ".join(names) if names else "none"))
        finally:
            self._showing = False

    def choose(self, tools: ToolSet) -> None:
        self.show_tools(tools)
        self.chosen.emit(tools)

    def _changed(self, _on: bool = False) -> None:
        if self._showing:
            return
        builtin = [n for n, a in self.builtin.items() if a.isChecked()]
        choice = next((k for k, a in self.choices.items() if a.isChecked()), "auto")
        self._make(builtin, self.tools.declared, choice)

    def _make(self, builtin, declared, choice: str) -> None:
        try:
            tools = make_tool_set(builtin, declared, choice)
        except ToolSetError:  # a named choice whose tool went: the model decides again
            tools = make_tool_set(builtin, declared, "auto")
        self.choose(tools)

    def edit_declared(self) -> None:
        self.dialog = ToolsDialog(self.tools.declared, self)
        self.dialog.finished.connect(self._on_dialog_done)
        self.dialog.open()

    def _on_dialog_done(self, _result: int) -> None:
        dlg, self.dialog = self.dialog, None
        if dlg is not None and dlg.declared is not None:
            try:
                self.choose(make_tool_set(self.tools.builtin, dlg.declared, self.tools.choice))
            except ToolSetError as e:
                self.button.setToolTip(str(e))
        if dlg is not None:
            dlg.deleteLater()


def follow_tools(chooser: ToolsChooser, flow: ChatFlow) -> None:
    """Keep `chooser` on the flow's conversation, and hand a change to the flow."""
    def shown(conv: LiveConversation) -> None:
        chooser.show_tools(conv.tools)

    flow.conversation_changed.connect(shown)
    chooser.chosen.connect(flow.set_tools)
