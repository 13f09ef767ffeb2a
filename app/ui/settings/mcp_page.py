"""Settings > Tools: the MCP servers LlamaDesk may start, what each offers, and what it costs.

The list is LlamaDesk's own mcp.json (app.mcp.config), read when the page
opens and written at each change, which the window's MCP runner
(app.ui.chat.mcp_runner, or a bare McpHub) is handed at once (`set_config`),
so a server turned off or a tool switched off is gone from the next turn
without a restart. A broken mcp.json is said in one line and left on disk as
it is until the user saves a change here: a typo in a hand-edited file should
not be wiped by opening Settings. The first change saved sets it aside as
mcp.json.broken (app.mcp.config refuses to write over a file it cannot read),
so what the user typed is never lost.

Status comes from the window's hub, which the chat shares, and the
always-allowed decisions are the runner's own, so a revoke here holds for the
very next call. Check starts the chosen server on a plain thread (the hub's
`ensure` blocks until it answers or fails), never on the GUI thread, and shows
what it lists. A tool's definition goes into every turn's prompt, so each
server says what its tools on take, counted with the loaded model's own
tokenizer; a user with a 41-tool server sees the price before the first reply
pays it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.mcp.config import (
    McpConfig,
    McpConfigError,
    ServerConfig,
    config_path,
    importable,
    load_config,
    read_foreign,
    save_config,
)
from app.mcp.hub import McpHub, McpTool, ServerState
from app.ui.settings.mcp_allowed import AllowedTools
from app.ui.settings.mcp_server_dialog import McpServerDialog
from app.ui.settings.mcp_server_panel import NOT_STARTED, ServerPanel, muted, status_text
from app.ui.widgets.levels import LevelLabel

POLL_MS = 1000  # the chat starts servers too: the page follows the hub while it is shown
CHECK_TIMEOUT_S = 30.0
BROKEN_SUFFIX = ".broken"  # a broken mcp.json is kept beside the new one under this name


def loaded_counter(loaded) -> Callable[[str], int] | None:
    """The window's loaded model's tokenizer (app.ui.chat.engine_thread.Loaded), or None for none
    or a server's. Tokenizing reads the vocabulary alone, never a context, so the GUI thread may
    use it while the engine thread decodes."""
    llm = loaded.model.llm if loaded is not None and loaded.model is not None else None
    if llm is None:
        return None
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


class _Checks(QObject):
    """Carries a Check's states from its thread back to the GUI thread (a queued signal)."""

    done = Signal(str, object)  # server name, its ServerState


class McpPage(QWidget):
    saved = Signal(object)  # the McpConfig written

    def __init__(self, mcp=None, count_tokens: Callable[[str], int] | None = None, parent=None):
        """`mcp`: the window's McpRunner, or an McpHub (anything with states() and set_config());
        None: Check starts a hub of the page's own, closed with the dialog."""
        super().__init__(parent)
        self.mcp = mcp
        self._own_hub = mcp is None
        self.file_error = LevelLabel()
        self.file_error.set_level("error")
        self.file_error.setWordWrap(True)
        self._broken = False
        try:
            self.config = load_config()
            self.file_error.hide()
        except McpConfigError as e:
            self.config = McpConfig()
            self._broken = True
            self.file_error.setText(f"{e}. It is left as it is until you save a change here, which "
                                    f"sets it aside as {config_path().name}{BROKEN_SUFFIX} first.")
        self.import_row = QHBoxLayout()
        self.import_buttons: list[QPushButton] = []
        self.servers = QListWidget()
        self.servers.setMaximumWidth(200)
        self.servers.currentRowChanged.connect(lambda _r: self._show_server())
        self.add_button = QPushButton("Add…")
        self.edit_button = QPushButton("Edit…")
        self.remove_button = QPushButton("Remove")
        self.add_button.clicked.connect(self.add_server)
        self.edit_button.clicked.connect(self.edit_server)
        self.remove_button.clicked.connect(self.remove_server)
        self.panel = ServerPanel(count_tokens)
        self.panel.changed.connect(lambda fields: self._change(**fields))
        self.panel.check_requested.connect(self.check)
        # the panel's parts, by the names the tests and screenshots use
        self.title, self.status, self.cost = self.panel.title, self.panel.status, self.panel.cost
        self.enabled, self.trusted, self.tools = self.panel.enabled, self.panel.trusted, self.panel.tools
        self.check_button = self.panel.check_button
        self.allowed_box = AllowedTools(getattr(mcp, "approvals", None))
        self.allowed, self.revoke_button = self.allowed_box.allowed, self.allowed_box.revoke_button
        self._checks = _Checks(self)
        self._checks.done.connect(self._checked)
        self._checking: set[str] = set()
        self._shown_states: dict[str, ServerState] = {}
        # The tools a server last listed: a change of its switches restarts it in the hub, and its
        # tools should not vanish from under the checkbox just clicked while it is stopped.
        self._listed: dict[str, tuple[McpTool, ...]] = {}
        self._layout()
        self._offer_import()
        self._fill_servers()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._poll)
        self._timer.start(POLL_MS)

    def _layout(self) -> None:
        left = QVBoxLayout()
        left.addWidget(self.servers, 1)
        buttons = QHBoxLayout()
        for b in (self.add_button, self.edit_button, self.remove_button):
            buttons.addWidget(b)
        left.addLayout(buttons)
        row = QHBoxLayout()
        row.addLayout(left)
        row.addWidget(self.panel, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(muted("Tools from MCP servers, offered in each chat's Tools menu. Changes here "
                            "are saved at once to mcp.json (Claude Desktop's format)."))
        lay.addWidget(self.file_error)
        lay.addLayout(self.import_row)
        lay.addLayout(row, 1)
        lay.addWidget(self.allowed_box)

    # -- what is shown ------------------------------------------------------------------
    def _states(self) -> dict[str, ServerState]:
        states = self.mcp.states() if self.mcp is not None else {}
        for name, st in states.items():
            if st.tools:
                self._listed[name] = st.tools
        return states

    def _fill_servers(self, select: str | None = None) -> None:
        current = select or self.current_name()
        states = self._shown_states = self._states()
        self.servers.blockSignals(True)
        self.servers.clear()
        for s in self.config.servers:
            status = status_text(s, states.get(s.name))
            item = QListWidgetItem(s.name if status == NOT_STARTED else f"{s.name} · {status.split(':')[0]}")
            item.setData(Qt.ItemDataRole.UserRole, s.name)
            item.setToolTip(status)
            self.servers.addItem(item)
        names = [s.name for s in self.config.servers]
        self.servers.setCurrentRow(names.index(current) if current in names else (0 if names else -1))
        self.servers.blockSignals(False)
        self._show_server()

    def current_name(self) -> str | None:
        item = self.servers.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def current(self) -> ServerConfig | None:
        name = self.current_name()
        return self.config.get(name) if name else None

    def _show_server(self) -> None:
        s = self.current()
        for w in (self.edit_button, self.remove_button):
            w.setEnabled(s is not None)
        if s is None:
            self.panel.show_server(None, None, (), False)
        else:
            self.panel.show_server(s, self._shown_states.get(s.name), self._listed.get(s.name, ()),
                                   s.name in self._checking)

    def _poll(self) -> None:
        if self.isVisible() and self._states() != self._shown_states:
            self._fill_servers()

    # -- changes --------------------------------------------------------------------------
    def save(self, cfg: McpConfig, select: str | None = None) -> bool:
        """Write mcp.json and hand it to the runner; a failure is one line and nothing changes."""
        try:
            if self._broken:  # the user's first change replaces the unreadable file: keep it aside
                path = config_path()
                path.replace(path.with_name(path.name + BROKEN_SUFFIX))
            save_config(cfg)
        except (OSError, McpConfigError) as e:
            self.file_error.setText(f"Could not save mcp.json: {e}")
            self.file_error.show()
            return False
        self.file_error.hide()
        self._broken = False
        self.config = cfg
        if self.mcp is not None:
            self.mcp.set_config(cfg)
        self.saved.emit(cfg)
        self._offer_import()
        self._fill_servers(select)
        return True

    def _change(self, **fields) -> None:
        s = self.current()
        if s is not None:
            self.save(self.config.with_server(replace(s, **fields)), s.name)

    def add_server(self) -> McpServerDialog:
        return self._edit(None)

    def edit_server(self) -> McpServerDialog:
        return self._edit(self.current())

    def _edit(self, server: ServerConfig | None) -> McpServerDialog:
        dlg = McpServerDialog(server, [s.name for s in self.config.servers], self)
        self.server_dialog = dlg  # tests fill it in

        def done(ok: int) -> None:
            if ok and dlg.server is not None:
                if server is not None:  # another command or URL may list other tools
                    self._listed.pop(server.name, None)
                cfg = self.config.without(server.name) if server is not None else self.config
                servers = list(cfg.with_server(dlg.server).servers)
                if server is not None:  # an edit keeps its place in the list
                    at = [s.name for s in self.config.servers].index(server.name)
                    servers.insert(at, servers.pop())
                self.save(McpConfig(tuple(servers)), dlg.server.name)
            dlg.deleteLater()

        dlg.finished.connect(done)
        dlg.open()
        return dlg

    def remove_server(self) -> None:
        s = self.current()
        if s is not None:
            self.save(self.config.without(s.name))

    # -- Check ----------------------------------------------------------------------------
    def check(self) -> None:
        s = self.current()
        if s is None or s.name in self._checking:
            return
        if self.mcp is None:
            self.mcp = McpHub(self.config)
        hub: McpHub = getattr(self.mcp, "hub", self.mcp)  # a runner's hub, made when first needed
        name, checks = s.name, self._checks
        self._checking.add(name)
        self._show_server()

        again = self._shown_states.get(name)
        restart = again is not None and again.status in ("ready", "failed")

        def run() -> None:
            if restart:
                state = hub.restart(name, CHECK_TIMEOUT_S)
            else:
                state = hub.ensure([name], CHECK_TIMEOUT_S)[name]
            try:
                checks.done.emit(name, state)
            except RuntimeError:  # the page was closed meanwhile
                pass

        threading.Thread(target=run, name=f"mcp-check-{name}", daemon=True).start()

    def _checked(self, name: str, _state: object) -> None:
        self._checking.discard(name)
        self._fill_servers()

    # -- import ---------------------------------------------------------------------------
    def _offer_import(self) -> None:
        for b in self.import_buttons:
            self.import_row.removeWidget(b)
            b.deleteLater()
        self.import_buttons = []
        if self.config.servers or self._broken:
            return
        for source, path in importable():
            try:
                found = read_foreign(path)
            except McpConfigError:
                continue
            if found:
                n = len(found)
                b = QPushButton(f"Import {n} server{'s' if n != 1 else ''} from {source}")
                b.setToolTip(f"Copies them from {path} into LlamaDesk's mcp.json; {source}'s file is "
                             "only read")
                b.clicked.connect(lambda _c=False, servers=found: self.import_servers(servers))
                self.import_row.addWidget(b)
                self.import_buttons.append(b)

    def import_servers(self, servers: tuple[ServerConfig, ...]) -> None:
        cfg = self.config
        for s in servers:
            cfg = cfg.with_server(s)
        self.save(cfg)

    def stop(self) -> None:
        """The dialog is closing: stop following the hub, and close a hub of the page's own."""
        self._timer.stop()
        if self._own_hub and self.mcp is not None:
            self.mcp.close()
            self.mcp = None
