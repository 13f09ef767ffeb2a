"""The conversation list beside the chat: what the user saved, findable.

The panel only reads the store and says what the user asked for (open,
rename, delete, import, export) through signals; acting on the window's
conversation is HistoryActions' job, so this widget stays testable alone. Of
replies it knows only which conversation has one being written (it is told,
`set_generating`), and marks that row: the reply goes on while another
conversation is read, and the list is where the user finds it again.

Each row is the title with a muted second line (when, how many messages).
Renaming edits the title in place, so a delegate draws the two lines while the
item's own text stays the bare title that the editor changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QVBoxLayout,
    QWidget,
)

from app.history import timestamps

ID_ROLE = Qt.ItemDataRole.UserRole
META_ROLE = Qt.ItemDataRole.UserRole + 1
WRITING = "writing a reply…"  # the marked row's second line


def when(ts: float, now: float | None = None) -> str:
    """Short and relative enough to scan a list: a time today, else a date.

    A stored time no clock produced (a bad import, a hand-edited file) shows as
    "?": one such row must not stop the list, or the window, from opening.
    """
    t = timestamps.local(ts)
    n = timestamps.local(time.time() if now is None else now)
    if t is None:
        return timestamps.UNKNOWN
    if n is not None and t.date() == n.date():
        return t.strftime("%H:%M")
    if n is not None and t.year == n.year:
        return t.strftime("%b %d")
    return t.strftime("%Y-%m-%d")


class _TwoLineDelegate(QStyledItemDelegate):
    """Asks `generating()` at paint time, so marking a row never touches its item (an item's
    data changed is what the list reads as a rename)."""

    def __init__(self, generating: Callable[[], int | None], parent=None) -> None:
        super().__init__(parent)
        self.generating = generating

    def paint(self, painter, option, index) -> None:
        self.initStyleOption(option, index)
        style = option.widget.style() if option.widget else None
        text, option.text = option.text, ""
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, option, painter, option.widget)
        r = option.rect.adjusted(6, 3, -6, -3)
        fm = option.fontMetrics
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        pal = option.palette
        fg = pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        writing = index.data(ID_ROLE) is not None and index.data(ID_ROLE) == self.generating()
        # The palette's link colour reads on both themes' bases; on the selection, its own text colour.
        mark = fg if selected else pal.color(QPalette.ColorRole.Link)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(fg)
        font = painter.font()
        font.setBold(True)
        painter.setFont(font)
        bold = painter.fontMetrics()
        width = r.width()
        if writing:
            d = max(6, bold.height() // 2)
            width -= d + 6
            painter.setBrush(mark)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.drawEllipse(QRectF(r.right() - d, r.y() + (bold.height() - d) / 2, d, d))
            painter.setPen(fg)
        painter.drawText(r.x(), r.y() + bold.ascent(), bold.elidedText(text, Qt.TextElideMode.ElideRight,
                                                                       width))
        font.setBold(False)
        font.setItalic(writing)
        painter.setFont(font)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        painter.setPen(mark if writing else fg if selected else muted)
        meta = WRITING if writing else index.data(META_ROLE) or ""
        painter.drawText(r.x(), r.y() + bold.height() + 2 + fm.ascent(),
                         fm.elidedText(meta, Qt.TextElideMode.ElideRight, r.width()))
        painter.restore()

    def sizeHint(self, option, index) -> QSize:
        h = option.fontMetrics.height()
        return QSize(160, 2 * h + 10)


class HistoryPanel(QWidget):
    open_requested = Signal(int)  # conversation id
    renamed = Signal(int, str)  # conversation id, new title
    delete_requested = Signal(int)
    import_requested = Signal()
    export_requested = Signal()

    def __init__(self, store=None, parent=None):
        super().__init__(parent)
        self.store = store
        self.current_id: int | None = None
        self.generating_id: int | None = None  # the conversation whose reply is being written
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search messages…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _t: self.refresh())
        # Answers only unless asked: a thinking model's reasoning is long, folded and full of
        # ideas it dropped, and would bury the answers a search is usually for.
        self.in_thinking = QCheckBox("Search thinking too")
        self.in_thinking.setToolTip("Also find text in thinking models' reasoning, not only in messages")
        self.in_thinking.toggled.connect(lambda _on: self.refresh())
        self.list = QListWidget()
        self.list.setItemDelegate(_TwoLineDelegate(lambda: self.generating_id, self.list))
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                  | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemClicked.connect(self._clicked)
        self.list.itemChanged.connect(self._changed)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("Open a LlamaDesk JSON transcript as a new conversation")
        self.import_button.clicked.connect(self.import_requested)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save this conversation as Markdown, JSON, HTML or text (Ctrl+E)")
        self.export_button.clicked.connect(self.export_requested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.export_button)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.search)
        col.addWidget(self.in_thinking)
        col.addWidget(self.list, 1)
        col.addLayout(buttons)
        self.setMinimumWidth(170)
        self.refresh()

    def query(self) -> str:
        return self.search.text().strip()

    def ids(self) -> list[int]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def item_for(self, conv_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            if self.list.item(i).data(ID_ROLE) == conv_id:
                return self.list.item(i)
        return None

    def refresh(self) -> None:
        """Reread the store: all conversations, or those whose messages match the search."""
        self.list.blockSignals(True)
        scrolled = self.list.verticalScrollBar().value()  # a refresh must not jump to the top
        try:
            self.list.clear()
            if self.store is None:
                return
            q = self.query()
            rows = self._hits(q) if q else self._summaries()
            for conv_id, title, meta, editable in rows:
                item = QListWidgetItem(title or "(untitled)")
                item.setData(ID_ROLE, conv_id)
                item.setData(META_ROLE, meta)
                item.setToolTip(f"{title}\n{WRITING if conv_id == self.generating_id else meta}")
                if editable:
                    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
            self.mark_current(self.current_id)
            self.list.verticalScrollBar().setValue(scrolled)
        finally:
            self.list.blockSignals(False)

    def _summaries(self):
        for s in self.store.list_conversations():
            n = s.message_count
            yield s.id, s.title, f"{when(s.updated_at)} · {n} message{'s' if n != 1 else ''}", True

    def _hits(self, q: str):
        seen: set[int] = set()
        for h in self.store.search(q, include_reasoning=self.in_thinking.isChecked()):
            if h.conversation_id not in seen:  # one row per conversation, its first match
                seen.add(h.conversation_id)
                where = f"{h.role} (thinking)" if h.in_reasoning else h.role
                yield h.conversation_id, h.title, f"{where}: {h.snippet}", False

    def set_generating(self, conv_id: int | None) -> None:
        """Mark the row of the conversation whose reply is being written (None: no row)."""
        if conv_id != self.generating_id:
            self.generating_id = conv_id
            self.list.viewport().update()

    def mark_current(self, conv_id: int | None) -> None:
        self.current_id = conv_id
        item = self.item_for(conv_id) if conv_id is not None else None
        if item is not None:
            self.list.setCurrentItem(item)
        else:  # no current row either: Delete must not act on the conversation left behind
            self.list.setCurrentRow(-1)
            self.list.clearSelection()

    def rename(self, conv_id: int) -> None:
        item = self.item_for(conv_id)
        if item is not None and item.flags() & Qt.ItemFlag.ItemIsEditable:
            self.list.editItem(item)

    def _clicked(self, item: QListWidgetItem) -> None:
        self.open_requested.emit(item.data(ID_ROLE))

    def _changed(self, item: QListWidgetItem) -> None:
        title = " ".join(item.text().split())
        if title:
            self.renamed.emit(item.data(ID_ROLE), title)
        else:
            self.refresh()  # an empty title is refused: show the old one again

    def _menu(self, pos) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        conv_id = item.data(ID_ROLE)
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.open_requested.emit(conv_id))
        rename = menu.addAction("Rename", lambda: self.rename(conv_id))
        rename.setEnabled(bool(item.flags() & Qt.ItemFlag.ItemIsEditable))
        menu.addAction("Delete", lambda: self.delete_requested.emit(conv_id))
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def keyPressEvent(self, ev) -> None:
        item = self.list.currentItem()
        if ev.key() == Qt.Key.Key_Delete and item is not None:
            self.delete_requested.emit(item.data(ID_ROLE))
            return
        super().keyPressEvent(ev)
