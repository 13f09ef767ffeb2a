"""The window's Serve switch: what may be served, and the panel that shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.ui.server.panel import ServerPanel

if TYPE_CHECKING:
    from app.ui.window import MainWindow


def open_panel(w: MainWindow) -> ServerPanel:
    if w.server_panel is None:
        w.server_panel = ServerPanel(w.server_runner, w.config.serve_port, parent=w)
        w.server_panel.toggled.connect(w.set_serving)
    w.server_panel.show()
    w.server_panel.raise_()
    return w.server_panel


def set_serving(w: MainWindow, on: bool) -> str | None:
    """Start or stop the window's server; returns why it could not start, if it could not."""
    if not on:
        w.server_runner.stop()
        return None
    panel = w.open_server()
    if w.loaded is None or w.loaded.model is None or not w.flow.model_ready:
        why = ("serving needs a local model: this window chats through a server" if w.remote
               else "no model is loaded yet")
        panel.show_problem(why)
        return why
    port = panel.port.value()
    if port != w.config.serve_port:
        w.config.serve_port = port
        w._save()
    from app import paths

    why = w.server_runner.start(w.loaded.model, w.loaded.identity["file"], port,
                                slot_ctx=min(w.config.n_ctx, 8192), data_dir=paths.data_dir() / "serve")
    if why:
        panel.show_problem(why)
    return why
