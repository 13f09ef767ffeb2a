"""The Batch panel attached to a MainWindow: its loaded weights, its settings, chat routing.

Kept out of window.py (which only adds the button and the shortcut) and out of
batch_panel.py (which knows nothing of the window) so either can change alone.
"""

from __future__ import annotations

from app.ui.batch.panel import BatchPanel


def for_window(win) -> BatchPanel:
    """The panel wired to a MainWindow: its loaded weights, its settings, chat routing."""
    def model_source():
        eng = win.bridge.worker.engine
        if eng is None or not win.flow.model_ready:
            return None
        return eng.model, eng.model.header.name or eng.model.report.model_path

    panel = BatchPanel(model_source, lambda: win.config.generation(), parent=win)
    win.bridge.router = lambda job: (panel.route_chat.isChecked()
                                     and panel.runner.route(job, win.bridge.worker))
    return panel
