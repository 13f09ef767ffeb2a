"""The window's remote servers: connect, remember (never the key), reconnect at start.

A key typed in the dialog without "remember" lives in this object for the
session only; otherwise it comes from the environment variable the saved
endpoint names, or the system keyring. The HTTP itself runs on the engine
thread (EngineWorker), like a model load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.chat.engines import EngineTarget
from app.config import SavedEndpoint
from app.errors import LlamaDeskError
from app.remote import keys as api_keys
from app.remote.endpoint import Endpoint
from app.ui.batch.worker import BatchTarget
from app.ui.remote.dialog import ConnectDialog

if TYPE_CHECKING:
    from app.ui.window import MainWindow


class Connections:
    def __init__(self, window: MainWindow):
        self.w = window
        self._session_keys: dict[str, str] = {}
        self.endpoint: Endpoint | None = None  # the connected server's, key included

    def saved(self) -> list[SavedEndpoint]:
        try:
            return self.w.config.saved_endpoints()
        except ValueError:  # read_config drops bad entries; a config built in code may hold one
            return []

    def active(self) -> SavedEndpoint | None:
        """The server in use when the window last closed, if it is still saved."""
        return next((e for e in self.saved() if e.base_url == self.w.config.active_endpoint), None)

    def endpoint_for(self, saved: SavedEndpoint) -> Endpoint:
        """The saved server with the key this session has for it: typed in the dialog, or from
        the environment variable it names. Without either, open_engine adds the keyring's, on
        the thread that opens it (a keyring can block). Raises EndpointConfigError."""
        key = self._session_keys.get(saved.base_url)
        if key is None and saved.api_key_env:
            key = api_keys.key_from_env(saved.api_key_env)
        return Endpoint.parse(saved.base_url, key)

    def connect(self, saved: SavedEndpoint) -> None:
        w = self.w
        try:
            endpoint = self.endpoint_for(saved)
        except LlamaDeskError as e:
            w.remote = saved
            w._on_load_failed(str(e))
            return
        w.remote, self.endpoint = saved, endpoint
        w.model_bar.set_loading(saved.label)
        w.bridge.load(EngineTarget(endpoint=endpoint, remote_model=saved.model,
                                   prompt_format=saved.prompt_format))

    def batch_target(self) -> BatchTarget | None:
        """A batch on the connected server: N requests in flight, the server batches them."""
        saved, endpoint = self.w.remote, self.endpoint
        if saved is None or endpoint is None:
            return None
        from app.remote.batch import RemoteBatchEngine

        return BatchTarget(None, saved.model or saved.label, lambda n: RemoteBatchEngine.connect(
            api_keys.with_saved_key(endpoint), saved.model, n, saved.prompt_format))

    def open_dialog(self) -> None:
        dlg = ConnectDialog(self.w, saved=self.w.remote)
        if dlg.exec() and dlg.result_endpoint is not None:
            self.connect_to(dlg.result_endpoint, dlg.result_key)

    def connect_to(self, saved: SavedEndpoint, key: str | None = None) -> None:
        """Remember the server (not its key) and chat through it."""
        w = self.w
        if key:
            self._session_keys[saved.base_url] = key
        w.config.remember_endpoint(saved)
        w._save()
        w.remote = saved
        w._refresh_models()
        w.load_model(saved)
