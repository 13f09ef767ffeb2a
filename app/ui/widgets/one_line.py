"""A label that keeps to one line whatever it is given: cut with an ellipsis, the whole in its tooltip.

A compiler's error can run to 300 characters; word-wrapped it pushes a dialog's
buttons down, unwrapped it widens the dialog past the screen. One line that
gives way to the layout, with the full text on hover, says it without moving
anything.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy


class OneLineLabel(QLabel):
    def __init__(self, parent=None):
        super().__init__(parent)
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
