"""A dismissible strip for errors and notes, instead of modal dialogs.

Errors (a model that will not load, a context overflow) must not block the
window: the user reads the line, maybe clicks its action, and keeps working.

The strip paints its level's border itself, from the palette at paint time,
and sets no stylesheet: a stylesheet's widget takes its palette when Qt
polishes it and keeps it through an application palette change, so a bar
shown in Light stayed near-black text on Dark's grey after the switch (and
the reverse). Its text is the palette's own WindowText, so it follows too.

A message that belongs to a moment (a tool call waiting for its result) is
taken back with `withdraw` when that moment ends, which hides the bar only if
it still says that message: a later message it shows meanwhile is left alone.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton

from app.ui.widgets.levels import MARK_RATIO, level_colour

EDGE = 4  # the level's mark down the left side, in pixels


class MessageBar(QFrame):
    action_triggered = Signal(str)  # the action key given to show()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
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
        row.setContentsMargins(8 + EDGE, 4, 4, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.action)
        row.addWidget(self.close_button)
        self.level = ""
        self._key = ""
        self.hide()

    def show_message(self, text: str, level: str = "error", action: str = "", key: str = "") -> None:
        self.level, self._key = level, key
        self.label.setText(text)
        self.action.setText(action)
        self.action.setVisible(bool(action))
        self.show()
        self.update()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def withdraw(self, text: str) -> None:
        """Hide the bar if it still shows `text`: what it said no longer holds."""
        if self.text() == text:
            self.hide()

    def level_color(self) -> QColor:
        """The colour the level's border is drawn in now, on this palette."""
        return level_colour(self.level, self.palette(), MARK_RATIO)

    def paintEvent(self, ev) -> None:
        super().paintEvent(ev)
        p = QPainter(self)
        colour = self.level_color()
        r = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        p.setPen(QPen(colour, 1))
        p.drawRect(r)
        p.fillRect(QRectF(0, 0, EDGE, self.height()), colour)
        p.end()

    def _act(self) -> None:
        self.hide()
        self.action_triggered.emit(self._key)
