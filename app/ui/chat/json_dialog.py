"""A dialog around JSON the user pastes: a hint, the text in a fixed-width box, one error line.

The schema dialog and the tools dialog check their text on OK and say why it
cannot be used in the one line under it, keeping the dialog open with the
text as typed; this is that shape, written once. The error line's red is the
theme's of the moment (app.ui.widgets.levels), chosen again on a switch, not
the one of the theme the dialog opened in.
"""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from app.ui.widgets.one_line import OneLineLabel


class JsonTextDialog(QDialog):
    def __init__(self, title: str, hint: str, text: str, placeholder: str, ok_text: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(title)
        label = QLabel(hint)
        label.setWordWrap(True)
        self.edit = QPlainTextEdit()
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setPlaceholderText(placeholder)
        self.edit.setPlainText(text)
        self.error = OneLineLabel()  # why the text cannot be used; hidden while there is nothing to say
        self.error.set_line("")
        self.error.set_level("error")
        self.edit.textChanged.connect(lambda: self.error.set_line(""))
        std = QDialogButtonBox.StandardButton
        self.buttons = QDialogButtonBox(std.Ok | std.Cancel)
        self.buttons.button(std.Ok).setText(ok_text)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(label)
        col.addWidget(self.edit, 1)
        col.addWidget(self.error)
        col.addWidget(self.buttons)
        self.resize(560, 380)

    def _show_error(self, text: str) -> None:
        self.error.set_line(text)
