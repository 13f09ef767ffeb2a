"""The row above the chat: the system prompt, then the reply format, tools and presets.

At the window's smallest width the choosers leave the system prompt a few
characters wide (28 px at 900 px), too narrow to read or edit what it says.
So when the prompt would get less than PROMPT_MIN_PX, the choosers move to a
second line under it, and back beside it when the width returns: the prompt
stays readable at any width, and a wide window spends no extra line on it.
"""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QWidget

PROMPT_MIN_PX = 240


class SetupRow(QWidget):
    def __init__(self, prompt: QWidget, choosers: list[QWidget], parent=None):
        super().__init__(parent)
        self.prompt = prompt
        self.label = QLabel("System")
        self.choosers = QWidget()
        row = QHBoxLayout(self.choosers)
        row.setContentsMargins(0, 0, 0, 0)
        for w in choosers:
            row.addWidget(w)
        row.addStretch(0)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.addWidget(self.label, 0, 0)
        self.grid.addWidget(prompt, 0, 1)
        self.grid.setColumnStretch(1, 1)
        self.stacked: bool | None = None  # set by the first resize
        self._place(False)

    def _place(self, stacked: bool) -> None:
        if stacked == self.stacked:
            return
        self.stacked = stacked
        self.grid.removeWidget(self.choosers)
        if stacked:
            self.grid.addWidget(self.choosers, 1, 1)
        else:
            self.grid.addWidget(self.choosers, 0, 2)

    def resizeEvent(self, ev) -> None:
        spacing = self.grid.horizontalSpacing()
        beside = self.label.sizeHint().width() + self.choosers.sizeHint().width() + 2 * spacing
        self._place(ev.size().width() - beside < PROMPT_MIN_PX)
        super().resizeEvent(ev)
