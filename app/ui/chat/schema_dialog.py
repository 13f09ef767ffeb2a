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

from PySide6.QtWidgets import QDialogButtonBox, QFileDialog, QPushButton

from app.chat.reply_format import ReplyFormat, ReplyFormatError, read_schema_file, schema_format
from app.ui.chat.json_dialog import JsonTextDialog

EXAMPLE = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'


class SchemaDialog(JsonTextDialog):
    def __init__(self, current: ReplyFormat | None = None, parent=None):
        super().__init__("Reply schema — LlamaDesk",
                         "Every reply of this conversation will be JSON valid against this schema. "
                         "Paste it, or load a .json file.",
                         current.schema if current is not None else "", EXAMPLE, "Use schema", parent)
        self.result_format: ReplyFormat | None = None
        self._name = current.name if current is not None else ""
        self.load_button = QPushButton("Load .json file…")
        self.load_button.clicked.connect(self._choose_file)
        self.buttons.addButton(self.load_button, QDialogButtonBox.ButtonRole.ActionRole)

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
