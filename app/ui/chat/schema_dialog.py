"""The schema a conversation's replies must match: pasted, or loaded from a .json file.

The schema is checked on OK by the compiler that will enforce it
(app.chat.reply_format.schema_format), so one that cannot be enforced is
said here, in one line under the text, and the dialog stays open with the
text as it was: nothing typed or loaded is lost to the error, and nothing
unenforceable reaches a turn. A file that cannot be read leaves the text
alone; one that loads replaces it and is checked at once.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from app.chat.reply_format import ReplyFormat, ReplyFormatError, read_schema_file, schema_format
from app.ui.widgets.one_line import OneLineLabel

EXAMPLE = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'
ERROR_LIGHT, ERROR_DARK = "#c0392b", "#ff7b72"  # the message bar's red; a light one on dark greys


class SchemaDialog(QDialog):
    def __init__(self, current: ReplyFormat | None = None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Reply schema — LlamaDesk")
        self.result_format: ReplyFormat | None = None
        self._name = current.name if current is not None else ""
        hint = QLabel("Every reply of this conversation will be JSON valid against this schema. "
                      "Paste it, or load a .json file.")
        hint.setWordWrap(True)
        self.edit = QPlainTextEdit()
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setPlaceholderText(EXAMPLE)
        self.edit.setPlainText(current.schema if current is not None else "")
        self.error = OneLineLabel()  # why the schema cannot be used; hidden while there is nothing to say
        self.error.set_line("")
        self.edit.textChanged.connect(lambda: self.error.set_line(""))
        self.load_button = QPushButton("Load .json file…")
        self.load_button.clicked.connect(self._choose_file)
        std = QDialogButtonBox.StandardButton
        buttons = QDialogButtonBox(std.Ok | std.Cancel)
        buttons.button(std.Ok).setText("Use schema")
        buttons.addButton(self.load_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(hint)
        col.addWidget(self.edit, 1)
        col.addWidget(self.error)
        col.addWidget(buttons)
        self.resize(560, 380)

    def _show_error(self, text: str) -> None:
        dark = self.palette().color(QPalette.ColorRole.Base).lightness() < 128
        self.error.setStyleSheet(f"color: {ERROR_DARK if dark else ERROR_LIGHT};")
        self.error.set_line(text)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load a JSON schema", "",
                                              "JSON schema (*.json);;All files (*)")
        if path:
            self.load_file(path)

    def load_file(self, path: str | Path) -> bool:
        """Put the file's schema in the box and check it; a file that cannot be read leaves the
        box as it was. True when the schema loaded and can be enforced."""
        try:
            text = read_schema_file(path)
        except ReplyFormatError as e:
            self._show_error(str(e))
            return False
        self.edit.setPlainText(text)
        self._name = Path(path).name
        return self._check() is not None

    def _check(self) -> ReplyFormat | None:
        try:
            fmt = schema_format(self.edit.toPlainText(), self._name)
        except ReplyFormatError as e:
            self._show_error(str(e))
            return None
        self.error.set_line("")
        return fmt

    def accept(self) -> None:
        fmt = self._check()
        if fmt is not None:
            self.result_format = fmt
            super().accept()
