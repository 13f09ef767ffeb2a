"""The MCP tools a user said "Always allow" to in a chat, each revocable here.

The decisions are app.mcp.approvals', saved the moment they are made; a revoke
is saved at once too, so the next call of that tool asks again, with or
without OK on the Settings dialog. Listed as server / tool, the form
`ask --allow-tools` takes.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QListWidget, QListWidgetItem, QPushButton, QSizePolicy

from app.mcp.approvals import Approvals

NONE_YET = "None: a tool you always allow in a chat is listed here."


class AllowedTools(QGroupBox):
    def __init__(self, approvals: Approvals | None = None, parent=None):
        """`approvals`: the ones the chat asks (the window's runner's), so a revoke holds at once."""
        super().__init__("Always allowed", parent)
        self.approvals = approvals if approvals is not None else Approvals.load()
        self.allowed = QListWidget()
        self.allowed.setMaximumHeight(80)
        self.revoke_button = QPushButton("Revoke")
        self.revoke_button.setToolTip("Ask again before this tool runs")
        self.revoke_button.clicked.connect(self.revoke)
        self.allowed.currentRowChanged.connect(self._selected)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)  # the tools get the room
        row = QHBoxLayout(self)
        row.addWidget(self.allowed, 1)
        row.addWidget(self.revoke_button, 0, Qt.AlignmentFlag.AlignTop)
        self.fill()

    def fill(self) -> None:
        self.allowed.clear()
        for server, tool in sorted(self.approvals.entries()):
            item = QListWidgetItem(f"{server} / {tool}")
            item.setData(Qt.ItemDataRole.UserRole, (server, tool))
            self.allowed.addItem(item)
        if not self.allowed.count():
            self.allowed.addItem(NONE_YET)
            self.allowed.item(0).setFlags(Qt.ItemFlag.NoItemFlags)
        self.revoke_button.setEnabled(False)

    def _selected(self, row: int) -> None:
        item = self.allowed.item(row) if row >= 0 else None
        self.revoke_button.setEnabled(item is not None and item.data(Qt.ItemDataRole.UserRole) is not None)

    def revoke(self) -> None:
        item = self.allowed.currentItem()
        entry = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if entry:
            self.approvals.revoke(*entry)
            self.fill()
