"""What the main window gains from this package: the Model menu (Get models…), the Models
window, the first-launch panel, and "Use this model" switching the chat.

Apart from window.py so the main window stays the place parts are assembled, not where
each one's wiring lives; it hands in only what this needs (the settings, how to save them,
how to load a model and list the picker again). The Hub threads start on first use: a
window that never opens the Models window and is not on a first launch runs none.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QBoxLayout, QMainWindow

from app.config import AppConfig
from app.engine.models import default_model_path
from app.ui.models.first_launch import FirstLaunchPanel
from app.ui.models.service import HubService
from app.ui.models.window import ModelsWindow
from app.ui.widgets.message_bar import MessageBar

MODELS_KEY = "models"  # the message bar's action that opens the Models window


class ModelsHookup(QObject):
    def __init__(self, window: QMainWindow, *, config: Callable[[], AppConfig], save: Callable[[], None],
                 load_model: Callable[[str], None], refresh_models: Callable[[], None],
                 current_model: Callable[[], str | None], bar: MessageBar,
                 open_file: Callable[[], None], connect_server: Callable[[], None]) -> None:
        super().__init__(window)
        self.main = window
        self.config, self.save = config, save
        self.load_model, self.refresh_models, self.current_model = load_model, refresh_models, current_model
        self.service: HubService | None = None
        self.models_window: ModelsWindow | None = None
        self.panel: FirstLaunchPanel | None = None
        menu = window.menuBar().addMenu("&Model")
        self.get_action = menu.addAction("Get models…")
        self.get_action.setShortcut(QKeySequence("Ctrl+Shift+M"))
        self.get_action.setToolTip("Search the Hugging Face Hub and download a model")
        self.get_action.triggered.connect(self.open)
        menu.addAction("Open a GGUF file…").triggered.connect(open_file)
        menu.addAction("Connect to a server…").triggered.connect(connect_server)
        bar.action_triggered.connect(lambda key: self.open() if key == MODELS_KEY else None)

    def notice_memory(self) -> tuple[Callable[[str], bool], Callable[[str], None]]:
        """(seen, remember) for LoadNotes: a model caveat explained once, kept in the settings."""
        def remember(notice: str) -> None:
            cfg = self.config()
            if notice not in cfg.notices_seen:
                cfg.notices_seen.append(notice)
                self.save()

        return (lambda notice: notice in self.config().notices_seen), remember

    def hub(self) -> HubService:
        if self.service is None:
            self.service = HubService(self)
            self.service.checked.connect(self._on_checked)
        return self.service

    def _fit_settings(self) -> tuple[int, int]:
        cfg = self.config()
        return cfg.n_ctx, cfg.n_gpu_layers

    def _in_use(self) -> str | None:
        """The chat's model file. The window says None both for the bundled model and for a
        server; with no server active it is the bundled file, which the library lists too."""
        path = self.current_model()
        if path is None and self.config().active_endpoint is None:
            return str(default_model_path())
        return path

    def open(self) -> ModelsWindow:
        if self.models_window is None:
            w = ModelsWindow(self.hub(), self._fit_settings, self._in_use, parent=self.main)
            w.use_model.connect(self.use)
            w.library_changed.connect(self.refresh_models)
            self.models_window = w
        self.models_window.show()
        self.models_window.raise_()
        return self.models_window

    def use(self, path: str) -> None:
        """ "Use this model": the picker lists it, the chat loads it."""
        self.load_model(path)  # sets the chat's model first, so the picker selects it
        self.refresh_models()
        if self.models_window is not None:
            self.models_window.refresh()

    def download(self, spec: str) -> None:
        self.open().download(spec)

    # -- the first launch ------------------------------------------------------
    def offer_first_launch(self, column: QBoxLayout, bundled: bool) -> FirstLaunchPanel | None:
        """On the first launch on the bundled model, the panel at the top of the chat column;
        remembered at once, so it is shown on one launch only."""
        cfg = self.config()
        if cfg.first_launch_done or not bundled:
            return None
        cfg.first_launch_done = True
        self.save()
        self.panel = FirstLaunchPanel()
        self.panel.download_requested.connect(self.download)
        self.panel.models_requested.connect(self.open)
        column.insertWidget(0, self.panel)
        n_ctx, gpu = self._fit_settings()
        self.hub().check(self.panel.specs(), n_ctx, gpu)
        return self.panel

    def _on_checked(self, checked) -> None:
        if self.panel is not None:
            self.panel.set_checked(checked)

    def shutdown(self) -> bool:
        if self.service is None:
            return True
        return self.service.shutdown()
