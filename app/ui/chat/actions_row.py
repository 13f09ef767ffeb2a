"""The row of buttons between the transcript and the message box.

Out of window.py, which assembles the parts: the buttons and what their
tooltips promise are written here once; the window connects them.

At the window's smallest width (900 px) the chat column is about 450 px wide,
and six buttons at the width the style wants (Fusion makes none narrower than
80 px) need over 500: the layout squeezed each below its text, so Regenerate
and Compare… ran into their own edges. Instead, the buttons on the right fold
into a "More" menu from the right, as a toolbar's overflow does, as many as
the width needs, and every button shown keeps its full size; their shortcuts
work either way.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QHBoxLayout, QMenu, QPushButton, QWidget

from app.ui.widgets.menu_button import MenuButton

MORE = "More"


def _button(text: str, tip: str) -> QPushButton:
    b = QPushButton(text)
    b.setToolTip(tip)
    return b


class ActionsRow(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.new_button = _button("New chat", "Start a new conversation (Ctrl+N)")
        self.regen_button = _button("Regenerate", "Ask the last question again")
        self.edit_button = _button("Edit last", "Put the last question back in the box to edit and resend")
        self.batch_button = _button("Batch…", "Decode a file of prompts together (Ctrl+B)")
        self.compare_button = _button("Compare…", "Compare models, settings and servers on the same "
                                                  "prompts (Ctrl+Shift+C)")
        self.serve_button = _button("Serve…", "Serve this model to other programs: an OpenAI-compatible "
                                              "API on 127.0.0.1, for chat and batches")
        self.more_menu = QMenu(self)
        self.more_menu.setToolTipsVisible(True)
        self.more_menu.aboutToShow.connect(self._fill_more)
        self.more_button = MenuButton(MORE)
        self.more_button.setMenu(self.more_menu)
        self.more_button.hide()
        self.left = (self.new_button, self.regen_button, self.edit_button)
        self.foldable = (self.batch_button, self.compare_button, self.serve_button)  # fold from the right
        self.folded: tuple[QPushButton, ...] = ()
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        for b in self.left:
            self.row.addWidget(b)
        self.row.addStretch(1)
        for b in (*self.foldable, self.more_button):
            self.row.addWidget(b)

    def _needed(self, shown: tuple[QPushButton, ...]) -> int:
        """The width `shown` take side by side at their own sizes, with the layout's spacing."""
        m = self.row.contentsMargins()
        return (sum(b.sizeHint().width() for b in shown) + self.row.spacing() * (len(shown) - 1)
                + m.left() + m.right())

    def _fold(self, width: int) -> None:
        keep = len(self.foldable)
        if self._needed(self.left + self.foldable) > width:  # then as many as fit beside More
            keep = max((k for k in range(keep)
                        if self._needed(self.left + self.foldable[:k] + (self.more_button,)) <= width),
                       default=0)
        folded = self.foldable[keep:]
        if folded == self.folded:
            return
        self.folded = folded
        for b in self.foldable:
            b.setVisible(b not in folded)
        self.more_button.setVisible(bool(folded))
        names = ", ".join(b.text() for b in folded)
        self.more_button.setToolTip(f"{names}: the window is too narrow for their buttons")

    def _fill_more(self) -> None:
        self.more_menu.clear()
        for b in self.folded:
            action = self.more_menu.addAction(b.text())
            action.setToolTip(b.toolTip())
            action.setEnabled(b.isEnabled())
            action.triggered.connect(b.click)  # the button's own click: one place says what it does

    def minimumSizeHint(self) -> QSize:
        """All of the right folded: what the row can give way to, whatever it shows now."""
        return QSize(self._needed((*self.left, self.more_button)), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        return QSize(self._needed(self.left + self.foldable), super().sizeHint().height())

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self._fold(ev.size().width())
