"""Where the user decides on an MCP server's tool call: shown while one waits, and while it runs.

A call reaches a program on this machine with arguments a model wrote, so it
is put to the user first, naming the server, the tool and the arguments: Allow
once, Always allow this tool (kept, and revocable in Settings > Tools), or Deny.
Once allowed the box says the call is running and offers Cancel (Esc does the
same, through the window's one Esc). It sits where the declared tools' result
box does (app.ui.chat.tool_result_box), and hides when no call waits.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from app.chat.mcp_calls import ALLOW_ALWAYS, ALLOW_ONCE, DENY
from app.chat.tool_set import McpFunction
from app.engine.message import ToolCall
from app.rendering.tool_parts import pretty_arguments

MAX_SHOWN_ARGS = 240


def shown_arguments(call: ToolCall) -> str:
    args = " ".join(pretty_arguments(call.arguments).split()) or "{}"
    return args if len(args) <= MAX_SHOWN_ARGS else args[: MAX_SHOWN_ARGS - 1] + "…"


class ApprovalBox(QFrame):
    decided = Signal(str)  # ALLOW_ONCE, ALLOW_ALWAYS or DENY
    cancel_clicked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.allow_once = QPushButton("Allow once")
        self.allow_always = QPushButton("Always allow this tool")
        self.deny = QPushButton("Deny")
        self.cancel = QPushButton("Cancel")
        self.allow_once.clicked.connect(lambda: self.decided.emit(ALLOW_ONCE))
        self.allow_always.clicked.connect(lambda: self.decided.emit(ALLOW_ALWAYS))
        self.deny.clicked.connect(lambda: self.decided.emit(DENY))
        self.cancel.clicked.connect(self.cancel_clicked.emit)
        self.allow_always.setToolTip("Calls of this tool run without asking from now on; "
                                     "Settings > Tools takes it back")
        row = QHBoxLayout()
        row.addStretch(1)
        for b in (self.allow_once, self.allow_always, self.deny, self.cancel):
            row.addWidget(b)
        col = QVBoxLayout(self)
        col.setContentsMargins(8, 6, 8, 6)
        col.addWidget(self.title)
        col.addLayout(row)
        self.call: ToolCall | None = None
        self.function: McpFunction | None = None
        self.running = False
        self.hide()

    def _head(self, call: ToolCall, fn: McpFunction) -> str:
        return (f"MCP server <b>{html.escape(fn.server)}</b> · tool <b>{html.escape(fn.tool)}</b> "
                f"with <code>{html.escape(shown_arguments(call))}</code>")

    def show_asking(self, call: ToolCall, fn: McpFunction, more: int = 0) -> None:
        self.call, self.function, self.running = call, fn, False
        after = f" ({more} more after it)" if more else ""
        self.title.setText(f"The model wants to call {self._head(call, fn)}{after}. Allow it?")
        for b in (self.allow_once, self.allow_always, self.deny):
            b.show()
        self.cancel.hide()
        self.show()
        self.allow_once.setFocus()

    def show_running(self, call: ToolCall, fn: McpFunction) -> None:
        self.call, self.function, self.running = call, fn, True
        self.title.setText(f"Running {self._head(call, fn)}… (Esc cancels)")
        for b in (self.allow_once, self.allow_always, self.deny):
            b.hide()
        self.cancel.show()
        self.show()

    def clear(self) -> None:
        self.call, self.function, self.running = None, None, False
        self.hide()
