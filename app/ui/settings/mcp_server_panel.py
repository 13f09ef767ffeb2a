"""One MCP server on the Tools page: what it runs, its status, its switches, its tools and their cost.

Shows; never saves. A switch or a tool's checkbox becomes `changed` with the
fields to replace in the server's config, and the page saves that, so every
change reaches mcp.json and the hub by one road. The tools are the ones the
server last listed, kept by the page while the server restarts after a
change, so a checkbox does not vanish from under the click that changed it.
A tool's definition goes into every turn's prompt, so the cost of the tools
left on is counted with the loaded model's own tokenizer; without a model
the page says so instead of guessing from the JSON's length.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.chat.tool_cost import ToolCostError, definitions_tokens
from app.mcp.config import ServerConfig
from app.mcp.hub import McpTool, ServerState
from app.ui.widgets.levels import LevelLabel

NOT_STARTED = "not started: it starts when a chat uses it, or on Check"


def muted(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def status_text(server: ServerConfig, state: ServerState | None) -> str:
    """One line: off, not started, starting, ready with its tools, or failed and why."""
    if not server.enabled:
        return "off"
    if state is None or state.status == "stopped":
        return NOT_STARTED
    if state.status == "ready":
        n = len(state.tools)
        return f"ready · {n} tool{'s' if n != 1 else ''}"
    if state.status == "failed":
        return f"failed: {state.error or 'no reason given'}"
    return state.status


class ServerPanel(QWidget):
    changed = Signal(dict)  # ServerConfig fields to replace
    check_requested = Signal()

    def __init__(self, count_tokens: Callable[[str], int] | None = None, parent=None):
        super().__init__(parent)
        self.count_tokens = count_tokens
        self.server: ServerConfig | None = None
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = LevelLabel()
        self.status.setWordWrap(True)
        self.enabled = QCheckBox("On")
        self.enabled.setToolTip("Off: never started, and its tools are offered to no chat")
        self.trusted = QCheckBox("Trusted")
        self.trusted.setToolTip("Its tools run without asking each time")
        self.enabled.toggled.connect(lambda on: self._emit(enabled=on))
        self.trusted.toggled.connect(lambda on: self._emit(trusted=on))
        self.check_button = QPushButton("Check")
        self.check_button.clicked.connect(self.check_requested)
        self.tools = QTreeWidget()
        self.tools.setHeaderLabels(["Tool", "What it does"])
        self.tools.setRootIsDecorated(False)
        self.tools.setColumnWidth(0, 150)
        # Fusion fills a checkbox with Base: on Dark's Base an unchecked tool's box vanished, so the
        # list sits on the Window colour, as the On and Trusted boxes above it do.
        self.tools.viewport().setBackgroundRole(QPalette.ColorRole.Window)
        self.tools.itemChanged.connect(self._tool_toggled)
        self.cost = muted()
        self._showing = False
        switches = QHBoxLayout()
        switches.addWidget(self.enabled)
        switches.addWidget(self.trusted)
        switches.addStretch(1)
        switches.addWidget(self.check_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.title)
        lay.addWidget(self.status)
        lay.addLayout(switches)
        lay.addWidget(self.tools, 1)
        lay.addWidget(self.cost)

    def show_server(self, s: ServerConfig | None, state: ServerState | None,
                    tools: tuple[McpTool, ...], checking: bool) -> None:
        self.server = s
        for w in (self.enabled, self.trusted, self.tools):
            w.setEnabled(s is not None)
        self._showing = True
        try:
            self.tools.clear()
            if s is None:
                self.title.setText("No servers yet: Add… one, e.g. command uvx, arguments mcp-server-time.")
                self.status.setText("")
                self.cost.setText("")
                self.check_button.setEnabled(False)
                return
            self.title.setText(f"<b>{html.escape(s.name)}</b> ({s.transport}): {html.escape(s.target)}")
            text = status_text(s, state)
            self.status.set_level("error" if text.startswith("failed") else "info")
            self.status.setText("Checking…" if checking else text)
            self.enabled.setChecked(s.enabled)
            self.trusted.setChecked(s.trusted)
            again = state is not None and state.status in ("ready", "failed")
            self.check_button.setEnabled(s.enabled and not checking)
            self.check_button.setText("Check again" if again else "Check")
            self.check_button.setToolTip("Start the server afresh and list its tools" if again
                                         else "Start the server now and list its tools")
            for tool in tools:
                item = QTreeWidgetItem([tool.name, " ".join(tool.description.split())])
                item.setToolTip(1, tool.description)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(0, Qt.CheckState.Unchecked if tool.name in s.disabled_tools
                                   else Qt.CheckState.Checked)
                self.tools.addTopLevelItem(item)
            self.cost.setText(self.cost_text(s, tools))
        finally:
            self._showing = False

    def cost_text(self, s: ServerConfig, tools: tuple[McpTool, ...]) -> str:
        if not tools:
            return "Its tools and their cost in prompt tokens show once it has started (Check)."
        on = [t.definition() for t in tools if t.name not in s.disabled_tools]
        if self.count_tokens is None:
            return (f"{len(on)} of {len(tools)} tools on. Their cost in prompt tokens is counted "
                    "with the loaded model's tokenizer: no local model is loaded.")
        try:
            tokens = definitions_tokens(self.count_tokens, on)
        except ToolCostError as e:
            return str(e)
        return (f"{len(on)} of {len(tools)} tools on: their definitions take {tokens:,} prompt "
                "tokens of every turn that uses this server.")

    def _emit(self, **fields) -> None:
        if self.server is not None and not self._showing:
            self.changed.emit(fields)

    def _tool_toggled(self, _item: QTreeWidgetItem, column: int) -> None:
        if self.server is None or self._showing or column != 0:
            return
        items = [self.tools.topLevelItem(i) for i in range(self.tools.topLevelItemCount())]
        off = [i.text(0) for i in items if i.checkState(0) != Qt.CheckState.Checked]
        listed = {i.text(0) for i in items}
        keep = [n for n in self.server.disabled_tools if n not in listed]  # no longer listed: kept off
        self._emit(disabled_tools=(*keep, *off))
