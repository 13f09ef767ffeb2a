"""A dialog around JSON the user pastes: a hint, the text in a fixed-width box, one error line.

The schema dialog and the tools dialog check their text on OK and say why it
cannot be used in the one line under it, keeping the dialog open with the
text as typed; this is that shape, written once.
"""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from app.ui.widgets.one_line import OneLineLabel

ERROR_LIGHT, ERROR_DARK = "#c0392b", "#ff7b72"  # the message bar's red; a light one on dark greys


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
        dark = self.palette().color(QPalette.ColorRole.Base).lightness() < 128
        self.error.setStyleSheet(f"color: {ERROR_DARK if dark else ERROR_LIGHT};")
        self.error.set_line(text)
