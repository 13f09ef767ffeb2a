"""The window's Serve switch: what may be served, and the panel that shows it.

Apart from the window so serving's rules live in one place: only a local
model that has finished loading can be served (a window chatting through a
server has no weights here to serve), and the port the user picks is kept in
the settings. It gets what it reads and does from the window's constructor.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from app.config import AppConfig
from app.paths import data_dir
from app.ui.chat.engine_thread import Loaded
from app.ui.server.panel import ServerPanel
from app.ui.server.runner import ServerRunner


class ServeSwitch:
    def __init__(self, runner: ServerRunner, config: Callable[[], AppConfig], save: Callable[[], None],
                 model: Callable[[], Loaded | None], remote: Callable[[], bool], parent: QWidget) -> None:
        """`model()` is what the chat has loaded once it may be used (None before); `remote()`
        says whether the chat goes through a server; `parent` owns the panel."""
        self.runner, self._config, self._save = runner, config, save
        self._model, self._remote, self._parent = model, remote, parent
        self.panel: ServerPanel | None = None  # created on first use

    def open_panel(self) -> ServerPanel:
        if self.panel is None:
            self.panel = ServerPanel(self.runner, self._config().serve_port, parent=self._parent)
            self.panel.toggled.connect(self.set_serving)
        self.panel.show()
        self.panel.raise_()
        return self.panel

    def set_serving(self, on: bool) -> str | None:
        """Start or stop the window's server; returns why it could not start, if it could not."""
        if not on:
            self.runner.stop()
            return None
        panel = self.open_panel()
        loaded = self._model()
        if loaded is None or loaded.model is None:
            why = ("serving needs a local model: this window chats through a server" if self._remote()
                   else "no model is loaded yet")
            panel.show_problem(why)
            return why
        cfg = self._config()
        port = panel.port.value()
        if port != cfg.serve_port:
            cfg.serve_port = port
            self._save()
        why = self.runner.start(loaded.model, loaded.identity["file"], port,
                                slot_ctx=min(cfg.n_ctx, 8192), data_dir=data_dir() / "serve")
        if why:
            panel.show_problem(why)
        return why
