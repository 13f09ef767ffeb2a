"""How a thinking model thinks in this conversation: on, off or an effort level, and a budget.

Beside the reply format and the tools, and shown only while the loaded model's template has a
thinking format: a model that cannot think gets no control that would do nothing. The choices
are the template's own (an on/off switch only where it has one, effort levels only where it has
them); the budget works on every thinking format, since it forces the format's own end marker.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QWidget

from app.chat.conversation import LiveConversation
from app.chat.thinking_controls import BUDGETS, ThinkingControls
from app.ui.chat.flow import ChatFlow
from app.ui.widgets.menu_button import MenuButton

DEFAULT = "default"


class ThinkingChooser(QWidget):
    chosen = Signal(object, object)  # think (None, True, False or a level), budget (None or tokens)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.controls: ThinkingControls | None = None
        self.think: bool | str | None = None
        self.budget: int | None = None
        self.button = MenuButton()
        self.button.setMaximumWidth(200)
        self.menu = QMenu(self)
        self.button.setMenu(self.menu)
        self.modes: dict[object, QAction] = {}
        self.budgets: dict[int | None, QAction] = {}
        self._showing = False
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Thinking"))
        row.addWidget(self.button)
        self.use_model(None)

    def use_model(self, controls: ThinkingControls | None) -> None:
        """The loaded model's choices; hidden for a model with no thinking format."""
        self.controls = controls
        self.setVisible(controls is not None)
        self.menu.clear()
        self.modes, self.budgets = {}, {}
        if controls is None:
            return
        default = "on" if controls.default_on else "off"
        modes: list[tuple[object, str]] = [(None, f"As the model does ({default})")]
        if controls.switch:
            modes += [(True, "On"), (False, "Off")]
        modes += [(level, f"Effort: {level}") for level in controls.efforts]
        self._group(modes, self.modes)
        self.menu.addSeparator()
        budgets: list[tuple[int | None, str]] = [(None, "No budget")]
        budgets += [(n, f"Budget: {n:,} tokens") for n in BUDGETS]
        self._group(budgets, self.budgets)
        self.show_choice(self.think, self.budget)

    def _group(self, items, into: dict) -> None:
        group = QActionGroup(self)
        for key, label in items:
            a = self.menu.addAction(label)
            a.setCheckable(True)
            group.addAction(a)
            a.toggled.connect(self._changed)
            into[key] = a

    def show_choice(self, think, budget: int | None) -> None:
        """Show the conversation's choice without announcing it as one; a choice this model does
        not offer shows as its default (and is what the conversation keeps until changed)."""
        self._showing = True
        try:
            self.think, self.budget = think, budget
            if self.controls is not None:
                self.modes.get(think, self.modes[None]).setChecked(True)
                self.budgets.get(budget, self.budgets[None]).setChecked(True)
            self.button.setText(self.label())
            self.button.setToolTip(f"{self.label()}: how this conversation's replies think; a "
                                   "budget ends the thinking after that many tokens")
        finally:
            self._showing = False

    def label(self) -> str:
        think = self.think
        mode = ("as the model does" if think is None else "on" if think is True else "off"
                if think is False else str(think))
        return mode + (f" · {self.budget:,} tok" if self.budget is not None else "")

    def _changed(self, _on: bool = False) -> None:
        if self._showing:
            return
        think = next((k for k, a in self.modes.items() if a.isChecked()), None)
        budget = next((k for k, a in self.budgets.items() if a.isChecked()), None)
        self.show_choice(think, budget)
        self.chosen.emit(think, budget)


def follow_thinking(chooser: ThinkingChooser, flow: ChatFlow) -> None:
    """Keep `chooser` on the flow's conversation, and a choice on that conversation."""
    def shown(conv: LiveConversation) -> None:
        chooser.show_choice(conv.think, conv.think_budget)

    def chosen(think, budget) -> None:
        flow.conversation.think, flow.conversation.think_budget = think, budget

    flow.conversation_changed.connect(shown)
    chooser.chosen.connect(chosen)
