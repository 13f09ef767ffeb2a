"""The conversation's tools beside its reply format: LlamaDesk's own, declared ones, and the choice.

A button with a menu: each built-in tool checked on or off, each MCP server
configured in Settings > Tools and switched on there (its status in the
tooltip, from the window's MCP runner), "Declare tools…"
for the user's own function definitions, and whether the model decides (Auto),
must call (Required) or may not (None). It shows the tools of the conversation
on screen and hands a change to the chat flow, which saves it with the
conversation at once, as the reply format chooser does.

The button is a push button with a menu, not a tool button: Fusion draws a
tool button's menu arrow over its last letters ("No tools" ran into it) and
leaves no room for it in its size, where a push button's size makes room for
the arrow (app.ui.widgets.menu_button). A label longer than the button's width
is cut with an ellipsis before the arrow, the whole in its tooltip.

The servers are read from mcp.json each time the menu opens, so one added in
Settings is offered at once; a server the conversation uses that is no longer
configured stays listed, checked, so it can be unchecked, and one that failed
to start says so in its label, not only in its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QWidget

from app.chat import builtin_tools
from app.chat.conversation import LiveConversation
from app.chat.tool_set import ToolSet, ToolSetError, make_tool_set
from app.mcp.config import McpConfigError, load_config
from app.ui.chat.flow import ChatFlow
from app.ui.chat.tools_dialog import ToolsDialog
from app.ui.settings.mcp_server_panel import status_text
from app.ui.widgets.menu_button import MenuButton  # here too for the presets chooser

BUILTIN_LABELS = {builtin_tools.CALCULATOR: "Calculator", builtin_tools.CLOCK: "Current time"}
CHOICE_LABELS = {"auto": "Auto: the model decides", "required": "Required: its first reply calls a tool",
                 "none": "None: no calls"}
MAX_WIDTH = 220


class ToolsChooser(QWidget):
    chosen = Signal(object)  # the ToolSet the user made

    def __init__(self, parent=None):
        super().__init__(parent)
        self.tools = ToolSet()
        self.button = MenuButton()
        self.button.setMaximumWidth(MAX_WIDTH)
        self.menu = QMenu(self)
        self.builtin: dict[str, QAction] = {}
        for name, label in BUILTIN_LABELS.items():
            a = self.menu.addAction(label)
            a.setCheckable(True)
            a.setToolTip(builtin_tools.DEFINITIONS[name]["function"]["description"])
            a.toggled.connect(self._changed)
            self.builtin[name] = a
        self.menu.setToolTipsVisible(True)
        self.mcp = None  # the window's McpRunner (or an McpHub): the servers' status (set_mcp)
        self.servers: dict[str, QAction] = {}
        self.servers_note = QAction(self)  # a broken mcp.json, said in the menu
        self.servers_note.setEnabled(False)
        self.menu.addAction(self.servers_note)
        self.servers_note.setVisible(False)
        self.menu.aboutToShow.connect(self.refresh_servers)
        self.declare = self.menu.addAction("Declare tools…")
        self.declare.triggered.connect(self.edit_declared)
        self.menu.addSeparator()
        group = QActionGroup(self)
        self.choices: dict[str, QAction] = {}
        for key, label in CHOICE_LABELS.items():
            a = self.menu.addAction(label)
            a.setCheckable(True)
            group.addAction(a)
            a.toggled.connect(self._changed)
            self.choices[key] = a
        self.button.setMenu(self.menu)
        self.dialog: ToolsDialog | None = None  # open while tools are being declared (tests)
        self._showing = False
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Tools"))
        row.addWidget(self.button)
        self.show_tools(ToolSet())

    def set_mcp(self, mcp) -> None:
        """Where the servers' status comes from: anything with states() (McpRunner, McpHub)."""
        self.mcp = mcp

    def refresh_servers(self) -> None:
        """Offer the configured, enabled MCP servers (and any the conversation still uses)."""
        for a in self.servers.values():
            self.menu.removeAction(a)
            a.deleteLater()
        self.servers = {}
        try:
            configured = load_config().servers
            self.servers_note.setVisible(False)
        except McpConfigError as e:
            configured = ()
            self.servers_note.setText("MCP servers: mcp.json cannot be read")
            self.servers_note.setToolTip(str(e))
            self.servers_note.setVisible(True)
        states = self.mcp.states() if self.mcp is not None else {}
        by_name = {s.name: s for s in configured}
        gone = [n for n in self.tools.mcp if n not in by_name]
        names = [s.name for s in configured if s.enabled] + gone
        self._showing = True
        try:
            for name in names:
                s, state = by_name.get(name), states.get(name)
                failed = state is not None and state.status == "failed"
                a = QAction(f"{name} (MCP{' · failed' if failed else ''})", self)
                a.setCheckable(True)
                a.setChecked(name in self.tools.mcp)
                a.setToolTip(f"MCP server {name}: " + (status_text(s, state) if s is not None
                                                       else "no longer configured (Settings > Tools)"))
                a.toggled.connect(self._changed)
                self.menu.insertAction(self.servers_note, a)
                self.servers[name] = a
        finally:
            self._showing = False

    def show_tools(self, tools: ToolSet) -> None:
        """Show `tools` (the conversation's) without announcing it as a choice."""
        self._showing = True
        try:
            self.tools = tools
            for name, a in self.builtin.items():
                a.setChecked(name in tools.builtin)
            for name, a in self.servers.items():
                a.setChecked(name in tools.mcp)
            choice = tools.choice if tools.choice in self.choices else "required"
            self.choices[choice].setChecked(True)
            n = len(tools.declared)
            self.declare.setText(f"Declared tools ({n})…" if n else "Declare tools…")
            self.button.setText(tools.label())
            names = [*tools.builtin, *(d["function"]["name"] for d in tools.declared),
                     *(f"{n} (MCP)" for n in tools.mcp)]
            self.button.setToolTip(f"{tools.label()}: the tools this conversation's replies may call "
                                   "(saved with it): " + (", ".join(names) if names else "none"))
        finally:
            self._showing = False

    def choose(self, tools: ToolSet) -> None:
        self.show_tools(tools)
        self.chosen.emit(tools)

    def _changed(self, _on: bool = False) -> None:
        if self._showing:
            return
        builtin = [n for n, a in self.builtin.items() if a.isChecked()]
        choice = next((k for k, a in self.choices.items() if a.isChecked()), "auto")
        unlisted = [n for n in self.tools.mcp if n not in self.servers]  # the menu not opened yet
        mcp = (*unlisted, *(n for n, a in self.servers.items() if a.isChecked()))
        self._make(builtin, self.tools.declared, choice, mcp)

    def _make(self, builtin, declared, choice: str, mcp: tuple[str, ...]) -> None:
        try:
            tools = make_tool_set(builtin, declared, choice, mcp)
        except ToolSetError:  # a named choice whose tool went: the model decides again
            tools = make_tool_set(builtin, declared, "auto", mcp)
        self.choose(tools)

    def edit_declared(self) -> None:
        self.dialog = ToolsDialog(self.tools.declared, self)
        self.dialog.finished.connect(self._on_dialog_done)
        self.dialog.open()

    def _on_dialog_done(self, _result: int) -> None:
        dlg, self.dialog = self.dialog, None
        if dlg is not None and dlg.declared is not None:
            try:
                self.choose(make_tool_set(self.tools.builtin, dlg.declared, self.tools.choice,
                                          self.tools.mcp))
            except ToolSetError as e:
                self.button.setToolTip(str(e))
        if dlg is not None:
            dlg.deleteLater()


def follow_tools(chooser: ToolsChooser, flow: ChatFlow) -> None:
    """Keep `chooser` on the flow's conversation, and hand a change to the flow."""
    def shown(conv: LiveConversation) -> None:
        chooser.show_tools(conv.tools)

    flow.conversation_changed.connect(shown)
    chooser.chosen.connect(flow.set_tools)
