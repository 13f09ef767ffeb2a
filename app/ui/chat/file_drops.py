"""Files dropped on the chat's transcript: handed on as paths (the composer attaches them), so
a drop anywhere in the chat does what a drop on the message box does. ChatView is one; any
other drop (text dragged within the view) is QTextBrowser's own."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTextBrowser

from app.ui.chat.composer import local_paths


class FileDropBrowser(QTextBrowser):
    files_dropped = Signal(list)  # local paths dropped on the transcript: the composer attaches them

    def dragEnterEvent(self, ev) -> None:
        if local_paths(ev.mimeData()):
            ev.acceptProposedAction()
        else:
            super().dragEnterEvent(ev)

    def dragMoveEvent(self, ev) -> None:
        if local_paths(ev.mimeData()):
            ev.acceptProposedAction()
        else:
            super().dragMoveEvent(ev)

    def dropEvent(self, ev) -> None:
        paths = local_paths(ev.mimeData())
        if paths:
            ev.acceptProposedAction()
            self.files_dropped.emit(paths)
        else:
            super().dropEvent(ev)
