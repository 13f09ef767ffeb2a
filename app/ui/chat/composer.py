"""Where the user types: Enter sends, Shift+Enter starts a new line; documents are attached here.

The text is cleared only once the window has accepted it for sending, and is
given back if the reply fails, so nothing typed is ever lost to an error.

Files come by the paperclip or by a drop on the box (or on the transcript,
which hands its drops here). Each is read off the GUI thread (app.ui.docs.worker)
and becomes a chip above the box with its tokens, counted by the loaded model
(`counter`), or one line in the message bar when it cannot be read. A dropped
folder is not attached file by file: it is handed on (`folder_dropped`) to be
indexed as a collection, once, with progress and Cancel, and then chosen for
this conversation. A folder may hold thousands of files; attached, every one
would be stored with the conversation and counted against its context, where a
collection keeps one index any conversation can search.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.message import Attachment
from app.ui.chat.attachment_chips import AttachmentChips, Pending
from app.ui.docs.worker import DocsService

FILE_FILTER = ("Documents (*.pdf *.docx *.html *.htm *.md *.markdown *.txt *.rst *.py *.js *.ts *.c *.h "
               "*.cpp *.rs *.go *.java *.json *.yaml *.toml *.csv);;All files (*)")


def local_paths(mime: QMimeData) -> list[str]:
    """The local files and folders a drag carries (none: it is text, or remote URLs)."""
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


class ComposerEdit(QPlainTextEdit):
    submitted = Signal()
    files_dropped = Signal(list)  # local paths

    def keyPressEvent(self, ev) -> None:
        if ev.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            ev.modifiers() & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.AltModifier)
        ):
            self.submitted.emit()
            return
        super().keyPressEvent(ev)

    def dragEnterEvent(self, ev) -> None:
        if local_paths(ev.mimeData()):
            ev.acceptProposedAction()
            return
        super().dragEnterEvent(ev)

    def dragMoveEvent(self, ev) -> None:
        if local_paths(ev.mimeData()):
            ev.acceptProposedAction()
            return
        super().dragMoveEvent(ev)

    def dropEvent(self, ev) -> None:
        paths = local_paths(ev.mimeData())
        if paths:  # a file's path is not text to send: it is attached
            ev.acceptProposedAction()
            self.files_dropped.emit(paths)
            return
        super().dropEvent(ev)


class Composer(QWidget):
    send_clicked = Signal()
    stop_clicked = Signal()
    attach_failed = Signal(str)  # one line: which file, and what is wrong with it
    folder_dropped = Signal(str)  # a folder to index as a collection for this conversation
    attached = Signal(object)  # the Attachment now a chip

    def __init__(self, parent=None):
        super().__init__(parent)
        self.edit = ComposerEdit()
        self.edit.setPlaceholderText("Message  (Enter sends, Shift+Enter new line, Esc stops)")
        self.edit.setTabChangesFocus(True)
        line_h = self.edit.fontMetrics().lineSpacing()
        self.edit.setFixedHeight(int(line_h * 3.6) + 12)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.setMinimumWidth(80)
        self.send_button.clicked.connect(self._on_button)
        self.attach_button = QToolButton()
        self.attach_button.setText("Attach")  # words, not a paperclip glyph: many fonts have none
        self.attach_button.setToolTip("Attach documents: PDF, DOCX, HTML, Markdown, text or code "
                                      "(or drop files here; a dropped folder is indexed as a collection)")
        self.attach_button.clicked.connect(self.choose_files)
        self.edit.submitted.connect(self._on_enter)
        self.edit.files_dropped.connect(self.attach_paths)
        self.busy = False
        self.chips = AttachmentChips()
        # Counts a document's tokens in the loaded model (None: none loaded, or a server: estimated).
        self.counter: Callable[[str], int] | None = None
        self.reading = 0  # files being read now
        self._docs: DocsService | None = None  # made on the first attachment
        self.tools_row = QHBoxLayout()  # the paperclip, and the conversation's collections beside it
        self.tools_row.setContentsMargins(0, 0, 0, 0)
        self.tools_row.setSpacing(2)
        self.tools_row.addWidget(self.attach_button)
        col = QVBoxLayout()
        col.addWidget(self.send_button)
        col.addLayout(self.tools_row)
        col.addStretch(1)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addLayout(col)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        outer.addWidget(self.chips)
        outer.addLayout(row)

    def add_tool(self, widget: QWidget) -> None:
        """A control beside the paperclip (the Docs chooser): what the model is given, by the box."""
        self.tools_row.addWidget(widget)

    def text(self) -> str:
        return self.edit.toPlainText()

    def set_text(self, text: str) -> None:
        self.edit.setPlainText(text)
        cur = self.edit.textCursor()
        cur.movePosition(cur.MoveOperation.End)
        self.edit.setTextCursor(cur)

    def set_busy(self, busy: bool) -> None:
        """While a reply runs the button is Stop; typing the next message stays allowed."""
        self.busy = busy
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop generating (Esc)" if busy else "Send (Enter)")

    def _on_button(self) -> None:
        (self.stop_clicked if self.busy else self.send_clicked).emit()

    def _on_enter(self) -> None:
        if not self.busy:
            self.send_clicked.emit()

    # -- attachments ----------------------------------------------------------
    def choose_files(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach documents", "", FILE_FILTER)
        self.attach_paths(paths)

    def attach_paths(self, paths: Iterable[str | Path]) -> None:
        """Read each file off the GUI thread into a chip; a folder is handed on as a collection."""
        for p in paths:
            path = Path(p)
            if path.is_dir():
                self.folder_dropped.emit(str(path))
                continue
            if self._docs is None:
                self._docs = DocsService("llamadesk-attach", self)
                self._docs.attached.connect(self._on_attached)
                self._docs.attach_failed.connect(self._on_failed)
            self.reading += 1
            self._docs.attach(path)

    def _on_attached(self, att: Attachment, ex) -> None:
        self.reading -= 1
        tokens = 0
        if self.counter is not None:
            try:
                tokens = self.counter(ex.text)
            except (ValueError, RuntimeError):  # the model went between the read and the count
                tokens = 0
        att = replace(att, tokens=tokens, chars=att.chars or len(ex.text))
        if self.chips.add(Pending(att, ex.text, tuple(ex.page_starts))):
            self.attached.emit(att)

    def _on_failed(self, path: str, line: str) -> None:
        self.reading -= 1
        name = Path(path).name
        self.attach_failed.emit(line if name in line else f"{name}: {line}")

    def recount(self) -> None:
        """A model was loaded: the chips' tokens in its vocabulary (what the gauges will count)."""
        if self.counter is None:
            return
        pending = self.chips.take()
        for p in pending:
            self.chips.add(replace(p, attachment=replace(p.attachment, tokens=self.counter(p.text))))

    def shutdown(self) -> None:
        if self._docs is not None:
            self._docs.shutdown()
