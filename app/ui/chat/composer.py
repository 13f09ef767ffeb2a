"""Where the user types: Enter sends, Shift+Enter starts a new line.

The text is cleared only once the window has accepted it for sending, and is
given back if the reply fails, so nothing typed is ever lost to an error.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget


class ComposerEdit(QPlainTextEdit):
    submitted = Signal()

    def keyPressEvent(self, ev) -> None:
        if ev.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            ev.modifiers() & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.AltModifier)
        ):
            self.submitted.emit()
            return
        super().keyPressEvent(ev)


class Composer(QWidget):
    send_clicked = Signal()
    stop_clicked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.edit = ComposerEdit()
        self.edit.setPlaceholderText("Message  (Enter sends, Shift+Enter new line, Esc stops)")
        self.edit.setTabChangesFocus(True)
        line_h = self.edit.fontMetrics().lineSpacing()
        self.edit.setFixedHeight(int(line_h * 3.6) + 12)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.setMinimumWidth(80)
        self.send_button.clicked.connect(self._on_button)
        self.edit.submitted.connect(self._on_enter)
        self.busy = False
        col = QVBoxLayout()
        col.addWidget(self.send_button)
        col.addStretch(1)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addLayout(col)

    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str) -> None:
        self.edit.setPlainText(text)
        cur = self.edit.textCursor()
        cur.movePosition(cur.MoveOperation.End)
        self.edit.setTextCursor(cur)

    def set_busy(self, busy: bool) -> None:
        """While a reply runs the button is Stop; typing the next message stays allowed."""
        self.busy = busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop generating (Esc)" if busy else "Send (Enter)")

    def _on_button(self) -> None:
        (self.stop_clicked if self.busy else self.send_clicked).emit()

    def _on_enter(self) -> None:
        if not self.busy:
            self.send_clicked.emit()
