"""One source of a reply shown in its document: the whole text, the passage selected and scrolled to.

Opened from the numbered sources under a reply (app.ui.chat.sources). The text
is the document's as the model was given it (an attachment's from the history
store, a collection's from its index), so the user reads the passage in its
context and checks the answer against it; a document whose text is no longer
kept shows the passage as the reply was given it, and says so.
"""

from __future__ import annotations

import html

from PySide6.QtGui import QColor, QFontDatabase, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QTextEdit, QVBoxLayout

from app.engine.message import Source


def utf16_offset(text: str, i: int) -> int:
    """Python's character offset `i` in `text` as Qt counts it (UTF-16 units: an emoji is two)."""
    return len(text[:i].encode("utf-16-le")) // 2


class PassageDialog(QDialog):
    """One source in its document: the whole text, the passage selected and scrolled to."""

    def __init__(self, source: Source, text: str | None, parent=None):
        super().__init__(parent)
        self.source = source
        where = f" · {source.where}" if source.where else ""
        self.setWindowTitle(f"[{source.n}] {source.document}{where}")
        self.resize(760, 560)
        title = QLabel(f"<b>[{source.n}] {html.escape(source.document)}</b>{html.escape(where)}"
                       + (f" · collection {html.escape(source.collection)}" if source.collection else ""))
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont))
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        box.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addWidget(title)
        col.addWidget(self.note)
        col.addWidget(self.text, 1)
        col.addWidget(box)
        self.found = text is not None and 0 <= source.start < source.end <= len(text)
        if text is None:
            self.note.setText("This document's text is no longer stored (its collection was removed or "
                              "re-indexed since): the passage as the reply was given it.")
            self.text.setPlainText(source.snippet)
            self.note.setVisible(True)
            return
        self.note.setVisible(False)
        self.text.setPlainText(text)
        if self.found:
            self._select(text, source.start, source.end)

    def _select(self, text: str, start: int, end: int) -> None:
        a, b = utf16_offset(text, start), utf16_offset(text, end)
        cur = self.text.textCursor()
        cur.setPosition(b)
        self.text.setTextCursor(cur)
        self.text.centerCursor()  # the passage's end in view, then its start: the whole on screen
        cur.setPosition(a)
        cur.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
        self.text.setTextCursor(cur)
        self.text.ensureCursorVisible()
        mark = QTextEdit.ExtraSelection()
        fmt = QTextCharFormat()
        hi = self.palette().color(QPalette.ColorRole.Highlight)
        fmt.setBackground(QColor(hi.red(), hi.green(), hi.blue(), 70))
        mark.format = fmt  # stays drawn when the selection's colour fades with the focus
        mark.cursor = QTextCursor(cur)
        self.text.setExtraSelections([mark])

    def passage(self) -> str:
        """What is selected, as text (Qt writes a paragraph break as U+2029)."""
        return self.text.textCursor().selectedText().replace("\u2029", "\n")
