"""A dismissible strip for errors and notes, instead of modal dialogs.

Errors (a model that will not load, a context overflow) must not block the
window: the user reads the line, maybe clicks its action, and keeps working.
"""

from __future__ import annotations

from typing import ClassVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton


class MessageBar(QFrame):
    action_triggered = Signal(str)  # the action key given to show()

    LEVEL_COLORS: ClassVar[dict[str, str]] = {"error": "#c0392b", "warning": "#d68910", "info": "#2e86c1"}

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(self.label.textInteractionFlags().TextSelectableByMouse)
        self.action = QPushButton()
        self.action.clicked.connect(lambda: self._act())
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.action)
        row.addWidget(self.close_button)
        self.level = ""
        self._key = ""
        self.hide()

    def show_message(self, text: str, level: str = "error", action: str = "", key: str = "") -> None:
        self.level, self._key = level, key
        color = self.LEVEL_COLORS.get(level, "#777777")
        self.setStyleSheet(f"MessageBar {{ border: 1px solid {color}; border-left: 4px solid {color}; }}")
        self.label.setText(text)
        self.action.setText(action)
        self.action.setVisible(bool(action))
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def _act(self) -> None:
        self.hide()
        self.action_triggered.emit(self._key)
