"""The documents waiting to go with the next question: one chip each above the message box.

A chip says what the model will be given before it is given it: the file's
name, a PDF's pages, and its tokens in the loaded model (what it costs of the
context, and so whether it is likely to go in whole). Its ✕ takes it back
before sending; once sent, the attachments belong to the question and the
chips go. A file that could not be read never becomes a chip: its one line
goes to the message bar, so a chip always stands for text the model can read.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QToolButton, QWidget

from app.engine.message import Attachment
from app.ui.docs.turns import Pending

NAME_CHARS = 32  # a longer name is cut in the middle; the whole is in the tooltip


def describe(att: Attachment) -> str:
    """'guide.pdf · 12 pages · 3,120 tok': the chip's words, and the user message's."""
    parts = [att.name]
    if att.pages:
        parts.append(f"{att.pages:,} page{'s' if att.pages != 1 else ''}")
    parts.append(f"{att.tokens:,} tok" if att.tokens else f"~{max(att.chars // 4, 1):,} tok")
    return " · ".join(parts)


def _short(name: str) -> str:
    if len(name) <= NAME_CHARS:
        return name
    half = (NAME_CHARS - 1) // 2
    return name[:half] + "…" + name[-half:]


class Chip(QFrame):
    removed = Signal(object)  # this chip

    def __init__(self, pending: Pending, parent=None):
        super().__init__(parent)
        self.pending = pending
        att = pending.attachment
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("attachmentChip")
        self.label = QLabel(describe(att).replace(att.name, _short(att.name), 1))
        self.label.setToolTip(f"{att.path or att.name}\n{att.kind} · {att.chars:,} characters"
                              + ("" if att.tokens else " · tokens estimated (no local model to count them)"))
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip(f"Do not send {att.name}")
        self.close_button.clicked.connect(lambda: self.removed.emit(self))
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 1, 1, 1)
        row.setSpacing(2)
        row.addWidget(self.label)
        row.addWidget(self.close_button)


class AttachmentChips(QScrollArea):
    """The row of chips; hidden while nothing is attached. More than fit the box's width scroll
    sideways: in a plain row, a dozen chips widened the window past its smallest width."""

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.chips: list[Chip] = []
        inner = QWidget()
        self.row = QHBoxLayout(inner)
        self.row.setContentsMargins(0, 0, 0, 2)
        self.row.setSpacing(4)
        self.row.addStretch(1)
        self.setWidget(inner)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        probe = Chip(Pending(Attachment("x", "", "text"), ""))
        bar = self.horizontalScrollBar().sizeHint().height()
        self.setFixedHeight(probe.sizeHint().height() + 2 + bar)  # room for the bar when it shows
        probe.deleteLater()
        # The newest chip in view: the row's end, once the new chip has widened it.
        sb = self.horizontalScrollBar()
        sb.rangeChanged.connect(lambda _lo, hi: sb.setValue(hi))
        self.setVisible(False)

    @property
    def pending(self) -> list[Pending]:
        return [c.pending for c in self.chips]

    def add(self, pending: Pending) -> bool:
        """Add a chip; False when the same text is already attached (dropped twice)."""
        if any(c.pending.attachment.sha256 == pending.attachment.sha256 for c in self.chips):
            return False
        chip = Chip(pending)
        chip.removed.connect(self.remove)
        self.row.insertWidget(len(self.chips), chip, 0, Qt.AlignmentFlag.AlignLeft)
        self.chips.append(chip)
        self.setVisible(True)
        self.changed.emit()
        return True

    def remove(self, chip: Chip) -> None:
        if chip in self.chips:
            self.chips.remove(chip)
            self.row.removeWidget(chip)
            chip.deleteLater()
            self.setVisible(bool(self.chips))
            self.changed.emit()

    def take(self) -> list[Pending]:
        """The attachments, handed over for sending; the row empties."""
        got = self.pending
        for chip in list(self.chips):
            self.row.removeWidget(chip)
            chip.deleteLater()
        self.chips.clear()
        self.setVisible(False)
        if got:
            self.changed.emit()
        return got

    def give_back(self, pending: list[Pending]) -> None:
        """A question that failed before any reply: its attachments are chips again."""
        for p in pending:
            self.add(p)
