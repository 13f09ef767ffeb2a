"""What the conversation list, Ctrl+E and Import do to the window.

Kept out of window.py (which only creates the panel and this object) so the
history features live in one place. The list's work runs on the GUI thread;
the store allows that, and each call is one short transaction. Export and
import wait on files, so they run on a thread of their own (files.py), one at
a time: the status line says which runs, its buttons and Ctrl+E are off
until its answer comes, and the answer reaches the same message bar and
status line as the rest. It is handed what it acts on (the store, the list,
the chat flow and view, the message bar, the window's New chat and status
line), not the window.

The list's highlight is always the conversation on screen, which is what
Export (Ctrl+E) saves: after New chat no row is highlighted, rather than the
one left behind, so the list never shows one conversation while Export acts
on another. Saving an older one is a click on it (it opens), then Export.

Switching never touches a reply being generated: ChatFlow.new_chat only
changes what is shown, the reply goes on in its own conversation, whose row
the list marks, and opening that row shows it streaming again. Clicking the
conversation already open does nothing to it (no reload, no redraw). Deleting
the conversation whose reply runs stops it first, its text so far sealed as
"interrupted"; deleting is a soft delete, so the message bar can offer Undo.

The list follows the store, whoever writes it: after each turn (a question
answered, or one stopped before its first token, whose new conversation the
store drops), and when another process (`llamadesk ask` or `import` in a
terminal) changed the database file, which a cheap stat of the file and its
WAL notices every WATCH_MS; no refresh cuts into a rename being typed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QTextDocument
from PySide6.QtWidgets import QAbstractItemView, QFileDialog, QWidget

from app.chat.conversation import LiveConversation
from app.history import export as exporter
from app.history.errors import StoreError
from app.history.store import Store
from app.ui.chat.flow import OPEN_GENERATING, ChatFlow
from app.ui.chat.view import ChatView
from app.ui.history.files import HistoryFiles, one_line
from app.ui.history.panel import HistoryPanel
from app.ui.widgets.message_bar import MessageBar

EXPORT_FILTERS = {"Markdown (*.md)": "md", "JSON (*.json)": "json", "HTML (*.html)": "html",
                  "Plain text (*.txt)": "txt"}
IMPORT_FILTER = "LlamaDesk transcript (*.json);;All files (*)"
UNDO_PREFIX = "undo-delete:"
WATCH_MS = 1500


def open_store(notes: list[str]) -> Store | None:
    """The shared history database; without it the window still chats, unsaved. Why it
    could not open, or what it noticed opening, is appended to `notes` for the window."""
    try:
        store = Store.open()
    except (StoreError, OSError) as e:
        notes.append(f"Conversations will not be saved: {e}")
        return None
    if store.notice:
        notes.append(store.notice)
    return store


class HistoryActions(QObject):
    opened = Signal(object)  # the LiveConversation now shown: the window updates its own controls
    exported = Signal(object)  # the Path an export wrote
    imported = Signal(int)  # the conversation an import added, now shown
    file_failed = Signal(str)  # the message bar's line for an export or import that failed

    def __init__(self, store: Callable[[], Store | None], panel: HistoryPanel, flow: ChatFlow,
                 view: ChatView, bar: MessageBar, *, new_chat: Callable[[], None],
                 status: Callable[[str, int], None], parent: QWidget) -> None:
        """`store()` is the window's (None: no history, or the window has closed it);
        `new_chat` is the window's New chat; `status(text, ms)` its status line; `parent`
        the window, which the shortcut and the file dialogs belong to."""
        super().__init__(parent)
        self._store, self.panel, self.flow, self.view, self.bar = store, panel, flow, view, bar
        self._new_chat, self._status, self._parent = new_chat, status, parent
        p = self.panel
        p.open_requested.connect(self.open)
        p.renamed.connect(self.rename)
        p.delete_requested.connect(self.delete)
        p.import_requested.connect(lambda: self.import_file())
        p.export_requested.connect(lambda: self.export_current())
        bar.action_triggered.connect(self._on_bar_action)
        self.files = HistoryFiles(self)
        self.files.exported.connect(self._exported)
        self.files.imported.connect(self._imported)
        self.files.failed.connect(self._file_failed)
        # The list follows the chat: a new chat appears with its first question, and until
        # then no row is highlighted, since the one highlighted is the one Export saves.
        self.flow.conversation_changed.connect(lambda conv: self.panel.mark_current(conv.id))
        self.flow.reply_started.connect(self._after_turn)
        self.flow.reply_finished.connect(lambda _m: self._after_turn())
        self.flow.reply_failed.connect(lambda _m: self._after_turn())
        self.flow.generating_changed.connect(p.set_generating)
        self._seen: tuple | None = None  # the database file as of the last refresh
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._follow_others)
        self._watch.start()
        sc = QShortcut(QKeySequence("Ctrl+E"), parent)
        sc.setContext(Qt.ShortcutContext.WindowShortcut)
        sc.activated.connect(lambda: self.export_current())
        sc.setWhatsThis("Export the conversation shown")  # its name in Help > Keyboard shortcuts
        self.export_shortcut = sc
        if self.store is None:  # the message bar already says why; an empty list would only confuse
            p.hide()

    @property
    def store(self) -> Store | None:
        return self._store()

    def refresh(self) -> None:
        self._seen = self._file_state()
        self.panel.current_id = self.flow.conversation.id
        self.panel.refresh()

    def _after_turn(self) -> None:
        """A reply may end while the user renames another row: rebuilding the list would drop the
        title being typed, so the file watcher brings the list up to date after it."""
        if self.panel.list.state() != QAbstractItemView.State.EditingState:
            self.refresh()

    def _file_state(self) -> tuple | None:
        """The database file and its write-ahead log as stat sees them: any commit changes one."""
        store = self.store
        if store is None:
            return None
        out: list[tuple[int, int] | None] = []
        for p in (store.path, Path(f"{store.path}-wal")):
            try:
                st = os.stat(p)
            except OSError:
                out.append(None)
            else:
                out.append((st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _follow_others(self) -> None:
        if self.store is None:  # none, or the window closed it
            self._watch.stop()
            return
        if self.flow.generating or self.panel.list.state() == QAbstractItemView.State.EditingState:
            return  # a reply's own saves; a title being typed: after
        if self._file_state() != self._seen:
            self.refresh()

    def _error(self, text: str) -> None:
        self.bar.show_message(text, "error")

    # -- switching ------------------------------------------------------------
    def open(self, conv_id: int) -> bool:
        if self.store is None:
            return False
        if conv_id == self.flow.conversation.id:  # already shown, its reply (if any) streaming
            self._find_query()
            return True
        try:
            stored = self.store.get_conversation(conv_id)
        except StoreError as e:
            self._error(f"Could not open the conversation: {one_line(e)}")
            self.refresh()
            return False
        self.flow.new_chat(LiveConversation.from_store(stored))  # a reply being written goes on
        conv = self.flow.conversation  # the one being written, if that is the one opened
        self.opened.emit(conv)
        self.panel.mark_current(conv.id)  # not a rebuild: a double-click's second click needs the item
        self._find_query()
        return True

    def _find_query(self) -> None:
        """After a search, show the match: select it in the view and scroll there."""
        q = self.panel.query()
        if q:
            view = self.view
            view.moveCursor(view.textCursor().MoveOperation.Start)
            view.follow = False
            view.find(q, QTextDocument.FindFlag(0))

    # -- rename / delete --------------------------------------------------------
    def rename(self, conv_id: int, title: str) -> None:
        try:
            self.store.rename_conversation(conv_id, title)
        except (StoreError, ValueError) as e:
            self._error(f"Could not rename: {one_line(e)}")
        else:
            for conv in (self.flow.conversation, self.flow.generating_conversation):
                if conv is not None and conv.id == conv_id:
                    conv.title = " ".join(title.split())
        self.refresh()

    def delete(self, conv_id: int) -> None:
        item = self.panel.item_for(conv_id)
        title = item.text() if item is not None else str(conv_id)
        self.flow.leave_reply(conv_id)  # its reply stops; its text is saved before the delete
        if self.flow.conversation.id == conv_id:
            self._new_chat()
        try:
            self.store.delete_conversation(conv_id)
        except StoreError as e:
            self._error(f"Could not delete: {one_line(e)}")
        else:
            self.bar.show_message(f"Deleted '{title}'", "info", action="Undo",
                                      key=f"{UNDO_PREFIX}{conv_id}")
        self.refresh()

    def _on_bar_action(self, key: str) -> None:
        if key == OPEN_GENERATING:
            running = self.flow.generating_conversation
            if running is not None and running.id is not None:
                self.open(running.id)
        elif key.startswith(UNDO_PREFIX):
            self.undo_delete(int(key[len(UNDO_PREFIX):]))

    def undo_delete(self, conv_id: int) -> None:
        try:
            self.store.restore_conversation(conv_id)
        except StoreError as e:
            self._error(f"Could not undo the delete: {one_line(e)}")
            return
        self.refresh()

    # -- export / import ----------------------------------------------------------
    def export_current(self, path: str | None = None) -> str | None:
        """Ctrl+E: the conversation as saved (a reply in progress as far as it got). The path
        being written, or None if nothing was started; `exported` or `file_failed` follows."""
        conv_id = self.flow.conversation.id
        store = self.store
        if store is None or conv_id is None:
            self.bar.show_message("Nothing to export yet: this conversation has no saved "
                                      "messages.", "info")
            return None
        if self._still_running():
            return None
        if path is None:
            name = re.sub(r"[^\w\- ]+", "", self.flow.conversation.title).strip()[:40] or "conversation"
            path, chosen = QFileDialog.getSaveFileName(
                self._parent, "Export conversation", str(Path.home() / f"{name}.md"),
                ";;".join(EXPORT_FILTERS))
            if not path:
                return None
            if exporter.format_for(path) is None:  # no usable extension: take the picked filter's
                path += "." + EXPORT_FILTERS.get(chosen, "md")
        if not self.files.export(store, conv_id, path):
            return None
        self._working(f"Exporting to {path}…")
        return path

    def import_file(self, path: str | None = None) -> str | None:
        """A JSON transcript becomes a new conversation, opened; a bad file writes nothing. The
        path being read, or None if nothing was started; `imported` or `file_failed` follows."""
        store = self.store
        if store is None:
            self._error("Cannot import: the history database is not available.")
            return None
        if self._still_running():
            return None
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self._parent, "Import conversation", str(Path.home()),
                                                  IMPORT_FILTER)
            if not path:
                return None
        if not self.files.import_(store, path):
            return None
        self._working(f"Importing {Path(path).name}…")
        return path

    def _still_running(self) -> bool:
        if self.files.busy is None:
            return False
        self.bar.show_message(f"An {self.files.busy.lower()} is still running: wait for it to "
                              "finish.", "info")
        return True

    def _working(self, text: str) -> None:
        self._status(text, 0)
        self._enable_files(False)

    def _enable_files(self, on: bool) -> None:
        self.panel.import_button.setEnabled(on)
        self.panel.export_button.setEnabled(on)
        self.export_shortcut.setEnabled(on)

    def _exported(self, written: Path) -> None:
        self._enable_files(True)
        self._status(f"Exported to {written}", 4000)
        self.exported.emit(written)

    def _imported(self, conv_id: int, path: str) -> None:
        self._enable_files(True)
        self.panel.search.clear()
        self.open(conv_id)
        self.refresh()
        self._status(f"Imported {Path(path).name}", 4000)
        self.imported.emit(conv_id)

    def _file_failed(self, what: str, line: str) -> None:
        self._enable_files(True)
        self._status("", 0)
        text = f"{what} failed: {line}"
        self._error(text)
        self.file_failed.emit(text)

    def shutdown(self) -> bool:
        """Before the window closes the store: an export or import in flight finishes on it."""
        self._watch.stop()
        return self.files.shutdown()
