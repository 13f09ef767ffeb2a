"""What the links on a saved message do: flip to another version, edit it, fork the path
up to a message into a new conversation, delete a message and what follows it.

The store holds the tree (app.history: parent ids, the path shown); the view draws the path
shown with each message's versions ("< 2 / 3 >") and these links. A switch changes the path
the store shows and draws the conversation again from it, so the window, a reopened window
and `llamadesk list` agree on what is shown. Nothing here runs while the conversation's own
reply is being written: the path it is written on must stay the path shown.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QInputDialog, QMessageBox, QWidget

from app.chat.conversation import LiveConversation
from app.history import tree
from app.history.errors import StoreError
from app.history.store import Store
from app.ui.chat.flow import ChatFlow
from app.ui.history.actions import HistoryActions
from app.ui.history.files import one_line
from app.ui.widgets.message_bar import MessageBar


class BranchActions(QObject):
    def __init__(self, store: Callable[[], Store | None], flow: ChatFlow, history: HistoryActions,
                 bar: MessageBar, window: QWidget, parent=None):
        super().__init__(parent)
        self.store, self.flow, self.history, self.bar, self.window = store, flow, history, bar, window
        self.confirm = self._ask_to_delete  # tests answer these themselves
        self.rewrite = self._rewrite_dialog
        flow.view.message_action.connect(self.act)

    def act(self, action: str, msg_id: int) -> bool:
        store, conv = self.store(), self.flow.conversation
        if store is None or conv.id is None:
            return False
        if self.flow.busy and action != "fork":
            self.bar.show_message("A reply is being written here: wait for it or stop it first.", "info")
            return False
        try:
            return {"show": self.show, "edit": self.edit, "fork": self.fork,
                    "delete": self.delete}.get(action, lambda *_: False)(store, conv.id, msg_id)
        except StoreError as e:
            self.bar.show_message(f"Could not change the conversation: {one_line(e)}", "error")
            return False

    def show(self, store: Store, conv_id: int, msg_id: int) -> bool:
        """The path through version `msg_id`, down through the latest replies after it."""
        store.show_branch(conv_id, msg_id)
        self._redraw(store, conv_id)
        return True

    def edit(self, store: Store, conv_id: int, msg_id: int) -> bool:
        """A question goes back into the box (ChatFlow.edit); a reply is rewritten in a dialog and
        kept beside the model's, marked edited, and what follows the model's stays with it."""
        msgs = self.flow.conversation.messages
        index = next((i for i, m in enumerate(msgs) if m.id == msg_id), None)
        if index is None:
            return False
        msg = msgs[index]
        if msg.role == "user":
            return self.flow.edit(index)
        text, ok = self.rewrite(msg.content)
        if not ok or text == msg.content:
            return False
        stored = next(m for m in store.get_conversation(conv_id).tree if m.id == msg_id)  # its parent
        store.add_message(conv_id, "assistant", text, parent_id=stored.parent_id, edited=True)
        self._redraw(store, conv_id)
        return True

    def _rewrite_dialog(self, text: str) -> tuple[str, bool]:
        return QInputDialog.getMultiLineText(self.window, "Edit the reply",
                                             "The rewritten reply is kept beside the model's:", text)

    def fork(self, store: Store, conv_id: int, msg_id: int) -> bool:
        new = store.fork(conv_id, msg_id)
        self.history.refresh()
        self.history.open(new)
        self.bar.show_message("Forked into a new conversation: the path up to that message, "
                              "the original left as it was.", "info")
        return True

    def delete(self, store: Store, conv_id: int, msg_id: int) -> bool:
        stored = store.get_conversation(conv_id)
        n = len(tree.subtree(stored.tree, msg_id))
        if not self.confirm(n):
            return False
        store.delete_branch(conv_id, msg_id)
        self._redraw(store, conv_id)
        self.history.refresh()
        return True

    def _ask_to_delete(self, n: int) -> bool:
        after = f" and the {n - 1} after it, on every branch" if n > 1 else ""
        answer = QMessageBox.question(self.window, "Delete", f"Delete this message{after}? "
                                      "This cannot be undone.")
        return answer == QMessageBox.StandardButton.Yes

    def _redraw(self, store: Store, conv_id: int) -> None:
        self.flow.new_chat(LiveConversation.from_store(store.get_conversation(conv_id)))
