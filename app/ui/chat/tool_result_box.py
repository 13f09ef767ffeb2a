"""Where the user gives a declared tool's result: shown while a call waits for one.

The model called a tool only the user can run (one they declared); the box
names the tool and shows its arguments, takes the result as typed, and hands
it to the chat flow, which records it as the call's tool message and asks the
model again. Hidden whenever no call waits.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout

from app.engine.message import ToolCall
from app.rendering.tool_parts import pretty_arguments

MAX_SHOWN_ARGS = 160


class ToolResultBox(QFrame):
    submitted = Signal(str)  # the result, as typed

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.edit = QPlainTextEdit()
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setFixedHeight(64)
        self.send_button = QPushButton("Send result")
        self.send_button.clicked.connect(self._send)
        row = QHBoxLayout()
        row.addWidget(self.edit, 1)
        row.addWidget(self.send_button)
        col = QVBoxLayout(self)
        col.setContentsMargins(8, 6, 8, 6)
        col.addWidget(self.title)
        col.addLayout(row)
        self.call: ToolCall | None = None
        self.hide()

    def show_waiting(self, calls: list[ToolCall]) -> None:
        """The first call still waiting (the next is asked after it), or hidden for none."""
        self.call = calls[0] if calls else None
        if self.call is None:
            self.hide()
            return
        args = " ".join(pretty_arguments(self.call.arguments).split())
        if len(args) > MAX_SHOWN_ARGS:
            args = args[: MAX_SHOWN_ARGS - 1] + "…"
        more = f" ({len(calls) - 1} more after it)" if len(calls) > 1 else ""
        self.title.setText(f"<b>{self.call.name}</b> was called with <code>{html.escape(args)}</code>{more}: "
                           "what did it return?")
        self.edit.setPlaceholderText(f"The result of {self.call.name}, as the tool would give it")
        self.edit.clear()
        self.show()
        self.edit.setFocus()

    def _send(self) -> None:
        text = self.edit.toPlainText()
        if self.call is not None and text.strip():
            self.submitted.emit(text)

