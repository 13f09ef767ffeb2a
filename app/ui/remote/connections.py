"""The window's remote servers: connect, remember (never the key), reconnect at start.

A key typed in the dialog without "remember" lives in this object for the
session only; otherwise it comes from the environment variable the saved
endpoint names, or the system keyring. The HTTP itself runs on the engine
thread (EngineWorker), like a model load.

It knows the window only through what the window hands it: the settings, how
to save them, the engine bridge and model bar it loads through, and the
window's own load, refresh and failure handlers, so a connection and a model
file go through the same steps.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from app.chat.engines import EngineTarget
from app.config import AppConfig, SavedEndpoint
from app.errors import LlamaDeskError
from app.remote import keys as api_keys
from app.remote.endpoint import Endpoint
from app.ui.batch.worker import BatchTarget
from app.ui.chat.engine_thread import EngineBridge
from app.ui.model_bar import ModelBar
from app.ui.remote.dialog import ConnectDialog


class Connections:
    def __init__(self, config: Callable[[], AppConfig], save: Callable[[], None], bridge: EngineBridge,
                 model_bar: ModelBar, *, load_model: Callable[[SavedEndpoint], None],
                 refresh_models: Callable[[], None], load_failed: Callable[[str], None],
                 parent: QWidget) -> None:
        """`config()` is the window's settings now (Settings replaces the object); `load_model`
        is the window's, which stops what runs on the old model and then calls connect();
        `load_failed` is what the window does when the bridge says a load failed."""
        self._config, self._save, self._bridge, self._model_bar = config, save, bridge, model_bar
        self._load_model, self._refresh_models, self._load_failed = load_model, refresh_models, load_failed
        self._parent = parent
        self._session_keys: dict[str, str] = {}
        self.remote: SavedEndpoint | None = None  # the server chatted through; None: a local model
        self.endpoint: Endpoint | None = None  # the connected server's, key included

    def saved(self) -> list[SavedEndpoint]:
        try:
            return self._config().saved_endpoints()
        except ValueError:  # read_config drops bad entries; a config built in code may hold one
            return []

    def active(self) -> SavedEndpoint | None:
        """The server in use when the window last closed, if it is still saved."""
        return next((e for e in self.saved() if e.base_url == self._config().active_endpoint), None)

    def endpoint_for(self, saved: SavedEndpoint) -> Endpoint:
        """The saved server with the key this session has for it: typed in the dialog, or from
        the environment variable it names. Without either, open_engine adds the keyring's, on
        the thread that opens it (a keyring can block). Raises EndpointConfigError."""
        key = self._session_keys.get(saved.base_url)
        if key is None and saved.api_key_env:
            key = api_keys.key_from_env(saved.api_key_env)
        return Endpoint.parse(saved.base_url, key)

    def connect(self, saved: SavedEndpoint) -> None:
        try:
            endpoint = self.endpoint_for(saved)
        except LlamaDeskError as e:
            self.remote = saved
            self._load_failed(str(e))
            return
        self.remote, self.endpoint = saved, endpoint
        self._model_bar.set_loading(saved.label)
        self._bridge.load(EngineTarget(endpoint=endpoint, remote_model=saved.model,
                                       prompt_format=saved.prompt_format))

    def batch_target(self) -> BatchTarget | None:
        """A batch on the connected server: N requests in flight, the server batches them."""
        saved, endpoint = self.remote, self.endpoint
        if saved is None or endpoint is None:
            return None
        from app.remote.slot_backend import RemoteBatchEngine

        return BatchTarget(None, saved.model or saved.label, lambda n: RemoteBatchEngine.connect(
            api_keys.with_saved_key(endpoint), saved.model, n, saved.prompt_format))

    def open_dialog(self) -> None:
        dlg = ConnectDialog(self._parent, saved=self.remote)
        if dlg.exec() and dlg.result_endpoint is not None:
            self.connect_to(dlg.result_endpoint, dlg.result_key)

    def connect_to(self, saved: SavedEndpoint, key: str | None = None) -> None:
        """Remember the server (not its key) and chat through it. It becomes the server the
        next launch opens with only once it has answered (the window's load handler says so):
        a server that fails here must not leave every later launch with no model."""
        if key:
            self._session_keys[saved.base_url] = key
        cfg = self._config()
        active = cfg.active_endpoint
        cfg.remember_endpoint(saved)
        cfg.active_endpoint = active
        self._save()
        self.remote = saved
        self._refresh_models()
        self._load_model(saved)
