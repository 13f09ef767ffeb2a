"""Under a reply given documents: how they went in, its numbered sources, and each passage in place.

The line says whether the documents went in whole (they fit with room for the
answer; their token cost beside) or as retrieved passages, so the user knows
what the model could have read. The sources are numbered as the prompt told
the model to cite them ([n]), each naming its document, its page or heading
and its first words. A click opens the passage in its document: the whole text,
as the model was given it (an attachment's from the history store, a
collection's from its index), scrolled to the passage and with it selected, so
the user reads it in its context and checks the answer against it.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtGui import QColor, QFontDatabase, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QTextEdit, QVBoxLayout

from app.engine.message import DOCS_WHOLE, DocsUse, Source
from app.ui.chat.markdown import Theme

SOURCE_SCHEME = "src"  # the view's links on a source: src:MESSAGE_INDEX/N
SNIPPET_CHARS = 110

TextLookup = Callable[[Source], "str | None"]  # a document's whole text by its source (None: gone)


def headline(docs: DocsUse) -> str:
    """'Documents whole · 3,120 tok' or 'Retrieved 5 passages · 1,840 tok'."""
    tok = f" · {docs.tokens:,} tok" if docs.tokens else ""
    if docs.mode == DOCS_WHOLE:
        return f"Documents whole{tok}"
    n = len(docs.sources)
    return f"Retrieved {n} passage{'s' if n != 1 else ''}{tok}"


def source_line(s: Source) -> str:
    """'guide.pdf · page 3 · “the first words…”' (plain text, as the exports and tests read it)."""
    where = f" · {s.where}" if s.where else ""
    coll = f" ({s.collection})" if s.collection else ""
    snip = " ".join(s.snippet.split())
    if len(snip) > SNIPPET_CHARS:
        snip = snip[:SNIPPET_CHARS - 1].rstrip() + "…"
    return f"{s.document}{coll}{where}" + (f" · “{snip}”" if snip else "")


def sources_html(theme: Theme, docs: DocsUse, index: int) -> str:
    """The block under reply `index` of the view: the headline, then one linked line per source."""
    muted = f"color:{theme.muted};"
    out = [f'<p style="margin-top:6px; margin-bottom:0px; {muted} font-size:small;">'
           f"<b>{html.escape(headline(docs))}</b></p>"]
    for s in docs.sources:
        link = f'href="{SOURCE_SCHEME}:{index}/{s.n}" style="color:{theme.link}; text-decoration:none;"'
        out.append(f'<p style="margin:0px; font-size:small;"><a {link}>'
                   f"[{s.n}]</a> <span style=\"{muted}\">{html.escape(source_line(s))}</span></p>")
    return "".join(out)


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
