"""Connect to server…: a base URL, an optional API key, a model from the server's own list.

"List models" asks the server on a worker thread (a slow or unreachable
host must not freeze the window; probe.py) and says in one line what
answered. The thread starts with the first question and ends when the
dialog closes.
Connect asks the same question first and closes only when the server
answered (and has the model named, if one is): a mistyped URL is said in
the dialog while the window keeps the model it has, instead of unloading it
for a server that is not there. The key is kept in the system keyring only
when the user ticks the box; the settings file keeps the URL, the model and,
if given, the name of an environment variable to read the key from, never
the key.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

from app.config import SavedEndpoint
from app.errors import LlamaDeskError
from app.remote import keys
from app.remote.endpoint import Endpoint
from app.ui.remote.probe import ProbeWorker
from app.ui.threads import WorkerThread
from app.ui.widgets.levels import LevelLabel

log = logging.getLogger("llamadesk.ui.remote")
FORMATS = (("chat", "Chat: the server applies the model's chat template"),
           ("transcript", "Plain transcript to /completions (a base model without a template)"))


class ConnectDialog(QDialog):
    _ask_probe = Signal(object)  # Endpoint
    _listed = Signal(object, object)  # ServerInfo or None, error text or None

    def __init__(self, parent=None, saved: SavedEndpoint | None = None):
        super().__init__(parent)
        self.setWindowTitle("Connect to server")
        self.result_endpoint: SavedEndpoint | None = None
        self.result_key: str | None = None
        self.url = QLineEdit(saved.base_url if saved else "")
        self.url.setPlaceholderText("http://127.0.0.1:8080/v1")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional (llama-server without --api-key, Ollama: none)")
        self.remember = QCheckBox("Remember the key in the system keyring")
        self.key_env = QLineEdit(saved.api_key_env or "" if saved else "")
        self.key_env.setPlaceholderText("or: the environment variable that holds it, e.g. OPENAI_API_KEY")
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.setMinimumContentsLength(28)
        self.model.lineEdit().setPlaceholderText("the server's only model")
        if saved and saved.model:
            self.model.addItem(saved.model)
        self.list_button = QPushButton("List models")
        self.list_button.clicked.connect(self.list_models)
        self.format = QComboBox()
        for key, label in FORMATS:
            self.format.addItem(label, key)
        if saved:
            self.format.setCurrentIndex(max(0, [k for k, _ in FORMATS].index(saved.prompt_format)))
        # What answered, or why not in the error colour of the theme showing (again on a switch).
        self.status = LevelLabel("Nothing leaves this machine until you list the models or connect.")
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # a server's words are not markup
        self.status.setWordWrap(True)
        self._listed.connect(self._on_listed)
        self._probe_thread: WorkerThread | None = None  # from the first question on
        self._connecting: tuple[SavedEndpoint, str | None] | None = None  # Connect, while it asks

        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.key)
        form.addRow("", self.remember)
        form.addRow("Key variable", self.key_env)
        row = QHBoxLayout()
        row.addWidget(self.model, 1)
        row.addWidget(self.list_button)
        form.addRow("Model", row)
        form.addRow("Prompt", self.format)
        std = QDialogButtonBox.StandardButton
        buttons = QDialogButtonBox(std.Ok | std.Cancel)
        self.connect_button = buttons.button(std.Ok)
        self.connect_button.setText("Connect")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addLayout(form)
        col.addWidget(self.status)
        col.addWidget(buttons)
        self.resize(560, self.sizeHint().height())

    def _endpoint(self) -> Endpoint:
        """What the fields say; EndpointConfigError (one line) when they cannot work."""
        key = self.key.text().strip() or None
        env = self.key_env.text().strip()
        if key is None and env:
            key = keys.key_from_env(env)
        return Endpoint.parse(self.url.text(), key)  # the keyring's, if any, is read off this thread

    def _fail(self, message: str) -> None:
        self._say(message, "error")

    def _say(self, text: str, level: str = "") -> None:
        self.status.setText(text)
        self.status.set_level(level)

    def list_models(self) -> None:
        try:
            ep = self._endpoint()
        except LlamaDeskError as e:
            self._fail(str(e))
            return
        self._ask(ep)

    def _ask(self, ep: Endpoint) -> None:
        self.list_button.setEnabled(False)
        self.connect_button.setEnabled(False)
        self._say(f"asking {ep.host}…")
        if self._probe_thread is None:
            w = ProbeWorker()
            self._probe_thread = WorkerThread(
                "llamadesk-list-models", w, requests=((self._ask_probe, w.probe),),
                forward=((w.done, self._listed),),
                log=log, busy="the model listing is still waiting on the server after %.1f s")
            self._probe_thread.start()
        self._ask_probe.emit(ep)

    def shutdown(self) -> bool:
        """End the probe's thread (a question in flight runs out its timeouts first). Safe to
        call twice; every way the dialog closes comes here."""
        thread = self._probe_thread
        if thread is None:
            return True
        if not thread.shutdown():
            return False  # still asking: kept, so it is never destroyed while it runs
        self._probe_thread = None  # shown again, the dialog asks on a new one
        return True

    def done(self, r: int) -> None:
        self.shutdown()
        super().done(r)

    def closeEvent(self, ev) -> None:
        self.shutdown()  # a dialog never shown closes without done()
        super().closeEvent(ev)

    def _on_listed(self, info, error) -> None:
        self.list_button.setEnabled(True)
        self.connect_button.setEnabled(True)
        connecting, self._connecting = self._connecting, None
        if error is not None:
            self._fail(f"{error}. Nothing was changed: the window keeps its model."
                       if connecting else error)
            return
        ids = [m.id for m in info.models]
        if connecting is not None:
            saved, key = connecting
            if saved.model and ids and saved.model not in ids:
                self._fail(f"the server has no model {saved.model!r} (it has: {', '.join(ids[:5])})")
                return
            self._done(saved, key)
            return
        current = self.model.currentText().strip()
        self.model.clear()
        for m in ids:
            self.model.addItem(m)
        if current:
            self.model.setCurrentText(current)
        n = len(ids)
        version = f" {info.version}" if info.version else ""
        self._say(f"{info.kind}{version}: {n} model{'s' if n != 1 else ''}"
                  + (f", ctx {info.n_ctx}" if info.n_ctx else ""))

    def accept(self) -> None:
        """Check the fields, then ask the server; the dialog closes once it answered."""
        if self._connecting is not None:
            return
        try:
            ep = self._endpoint()
            saved = SavedEndpoint.from_json({
                "base_url": ep.base_url, "model": self.model.currentText().strip() or None,
                "prompt_format": self.format.currentData(),
                "api_key_env": self.key_env.text().strip() or None})
        except (LlamaDeskError, ValueError) as e:
            self._fail(str(e))
            return
        self._connecting = (saved, ep.api_key)
        self._ask(ep)

    def _done(self, saved: SavedEndpoint, key: str | None) -> None:
        typed = self.key.text().strip()
        if typed and self.remember.isChecked():
            try:
                keys.save_key(saved.base_url, typed)
            except (LlamaDeskError, ValueError) as e:
                self._fail(str(e))
                return
        self.result_endpoint, self.result_key = saved, key
        super().accept()
