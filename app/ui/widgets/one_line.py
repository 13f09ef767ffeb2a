"""Labels that keep to one line whatever they are given: cut with an ellipsis, the whole in the tooltip.

A compiler's error can run to 300 characters; word-wrapped it pushes a dialog's
buttons down, unwrapped it widens the dialog past the screen. One line that
gives way to the layout, with the full text on hover, says it without moving
anything. OneLineLabel does it for plain text (and can carry a level's colour,
as LevelLabel does); RichLineLabel for a line of rich text, such as the model
bar's "runs on <b>CPU</b> · ctx 4096 · threads …", which a plain QLabel cut
off mid-word at a narrow width with nothing to say it went on.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy

from app.ui.widgets.levels import LevelLabel

ELLIPSIS = "…"


class OneLineLabel(LevelLabel):
    def __init__(self, parent=None):
        super().__init__("", parent)
        self._full = ""
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def set_line(self, text: str) -> None:
        """Show `text` (its line breaks as spaces) on one line; "" hides the label."""
        self._full = " ".join(text.split())
        self.setToolTip(self._full)
        self.setVisible(bool(self._full))
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight,
                                                   max(self.width(), 40)))


class RichLineLabel(QLabel):
    """One line of rich text in two parts: a head that gives way, cut short with "…" where the
    width ends, and a tail that is always shown whole after it (a warning the line must not
    lose). The tooltip is the whole line when it is cut, then the details given, if any."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._head, self._tail, self._details = text, "", ""
        self.elided = False
        self._fit()

    def set_parts(self, head: str, tail: str = "") -> None:
        """`head` and `tail` are rich text; the head is what gets cut."""
        self._head, self._tail = head, tail
        self._fit()

    def set_details(self, details: str) -> None:
        """What the tooltip says under the line (plain text)."""
        self._details = details
        self._tip()

    def full_text(self) -> str:
        """The whole line as plain text, cut or not."""
        return self._document(self._head + self._tail).toPlainText()

    def shown_text(self) -> str:
        """The line as shown now, as plain text (ending in "…" and the tail when cut)."""
        return self._shown_plain

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self._fit()

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.FontChange:
            self._fit()

    def _document(self, html: str) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(self.font())
        doc.setDocumentMargin(0)
        doc.setHtml(html)
        return doc

    def _cut(self, head_chars: int, keep: int) -> QTextDocument:
        """The whole line with the head's plain text cut to its first `keep` characters and "…"."""
        doc = self._document(self._head + self._tail)
        cursor = QTextCursor(doc)
        cursor.setPosition(keep)
        cursor.setPosition(head_chars, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.insertText(ELLIPSIS + (" " if self._tail else ""))  # "…", then the tail apart
        return doc

    def _fit(self) -> None:
        room = self.contentsRect().width()
        whole = self._document(self._head + self._tail)
        self.elided = whole.idealWidth() > room and bool(self._head) and room > 0
        if not self.elided:
            self._shown_plain = whole.toPlainText()
            self.setText(self._head + self._tail)
            self._tip()
            return
        head = self._document(self._head).toPlainText()
        lo, hi = 0, len(head)  # the most characters of the head that fit with the ellipsis
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._cut(len(head), mid).idealWidth() <= room:
                lo = mid
            else:
                hi = mid - 1
        keep = lo
        while keep > 0 and head[keep - 1] in " ·,:;":  # "ctx 4096 …", not "ctx 4096 · …"
            keep -= 1
        doc = self._cut(len(head), keep)
        self._shown_plain = doc.toPlainText()
        self.setText(doc.toHtml())
        self._tip()

    def _tip(self) -> None:
        line = self.full_text() if self.elided else ""
        self.setToolTip("\n".join(part for part in (line, self._details) if part))
