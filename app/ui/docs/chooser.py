"""The conversation's collections, beside its tools: which indexed folders its questions search.

A button with a menu, as the Tools chooser: each collection checked on or off
(the list read from the index each time the menu opens, so one indexed a
moment ago is there), then "Collections…" to index, re-index or remove them.
It shows the conversation on screen's choice and hands a change to the chat
flow, which keeps it with the conversation, so a reopened one searches the
same folders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QMenu, QWidget

from app.docs.index import DocsIndex
from app.ui.widgets.menu_button import MenuButton

MAX_WIDTH = 200
NARROW = "Docs: a name"  # the button is never wider than these words need: the rest is elided


def label(names: list[str]) -> str:
    """The button's words, which name what it is without a label beside it (the row above the chat
    has no room to spare at the window's smallest width)."""
    if not names:
        return "Docs"
    return f"Docs: {names[0]}" if len(names) == 1 else f"Docs: {len(names)}"


class DocsChooser(QWidget):
    chosen = Signal(list)  # the collections' names the user checked
    manage = Signal()  # "Collections…": open the window

    def __init__(self, index_path: Path | None = None, parent=None):
        super().__init__(parent)
        self.index_path = index_path
        self.names: list[str] = []
        self.known: Callable[[], list[str]] = self._from_index
        self.button = MenuButton()
        probe = MenuButton(NARROW)
        self.button.setMaximumWidth(min(probe.sizeHint().width(), MAX_WIDTH))
        probe.deleteLater()
        self.menu = QMenu(self)
        self.menu.aboutToShow.connect(self.fill)
        self.button.setMenu(self.menu)
        self.actions_by_name: dict[str, QAction] = {}
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        self.show_collections([])

    def _from_index(self) -> list[str]:
        try:
            with DocsIndex.open(self.index_path) as index:
                return [c.name for c in index.collections()]
        except Exception:  # noqa: BLE001 - the menu says none can be read; the window says why
            return []

    def fill(self) -> None:
        """The menu, from the index as it is now; a chosen collection since removed stays listed
        (unchecking it is how the conversation lets it go)."""
        self.menu.clear()
        self.actions_by_name.clear()
        names = self.known()
        for name in [*names, *(n for n in self.names if n not in names)]:
            a = self.menu.addAction(name if name in names else f"{name} (removed)")
            a.setCheckable(True)
            a.setChecked(name in self.names)
            a.toggled.connect(self._changed)
            self.actions_by_name[name] = a
        if not self.actions_by_name:
            none = self.menu.addAction("No collections yet")
            none.setEnabled(False)
        self.menu.addSeparator()
        self.menu.addAction("Collections…").triggered.connect(self.manage.emit)

    def show_collections(self, names: list[str]) -> None:
        """Show the conversation's choice without announcing it as one."""
        self.names = list(names)
        self.button.setText(label(self.names))
        self.button.setToolTip("The indexed folders this conversation's questions search (saved with it): "
                               + (", ".join(self.names) if self.names else "none"))
        for name, a in self.actions_by_name.items():
            a.blockSignals(True)
            a.setChecked(name in self.names)
            a.blockSignals(False)

    def choose(self, names: list[str]) -> None:
        self.show_collections(names)
        self.chosen.emit(list(self.names))

    def _changed(self, _on: bool = False) -> None:
        self.choose([n for n, a in self.actions_by_name.items() if a.isChecked()])


def follow_docs(chooser: DocsChooser, flow) -> None:
    """Keep `chooser` on the flow's conversation, and hand a change to the flow (ChatFlow)."""
    def shown(conv) -> None:
        chooser.show_collections(list(getattr(conv, "collections", ()) or ()))

    flow.conversation_changed.connect(shown)
    chooser.chosen.connect(flow.set_collections)
