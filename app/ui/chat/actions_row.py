"""The row of buttons between the transcript and the message box.

Out of window.py, which assembles the parts: the buttons and what their
tooltips promise are written here once; the window connects them.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget


def _button(text: str, tip: str) -> QPushButton:
    b = QPushButton(text)
    b.setToolTip(tip)
    return b


class ActionsRow(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.new_button = _button("New chat", "Start a new conversation (Ctrl+N)")
        self.regen_button = _button("Regenerate", "Ask the last question again")
        self.edit_button = _button("Edit last", "Put the last question back in the box to edit and resend")
        self.batch_button = _button("Batch…", "Decode a file of prompts together (Ctrl+B)")
        self.compare_button = _button("Compare…", "Compare models, settings and servers on the same "
                                                  "prompts (Ctrl+Shift+C)")
        self.serve_button = _button("Serve…", "Serve this model to other programs: an OpenAI-compatible "
                                              "API on 127.0.0.1, for chat and batches")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for b in (self.new_button, self.regen_button, self.edit_button):
            row.addWidget(b)
        row.addStretch(1)
        for b in (self.batch_button, self.compare_button, self.serve_button):
            row.addWidget(b)
