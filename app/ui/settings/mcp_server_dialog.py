"""Add or edit one MCP server: a command to run (stdio) or a URL to reach (HTTP), and how far to trust it.

A server is what a user copies from a README: a command line, or a URL and a
token header. The arguments are one line split as a shell splits it, so a
pasted `npx -y @modelcontextprotocol/server-filesystem "/my docs"` keeps its
quoted path whole; environment variables and headers are one a line. Checked
on OK: a mistake is said in one line under the fields and the dialog stays
open with everything as typed, so nothing is lost. Whether a server is on and
which of its tools are off are kept from the server being edited: those are
set on the Tools page, beside the tools they concern.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from app.errors import LlamaDeskError
from app.mcp.config import ServerConfig
from app.ui.widgets.levels import LevelLabel

KINDS = (("stdio", "Command (runs on this computer)"), ("http", "URL (HTTP server; …/sse for SSE)"))


class ServerFormError(LlamaDeskError):
    """A field that cannot make a server, named in one line."""


def _pairs(text: str, sep: str, what: str) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, found, value = line.partition(sep)
        if not found or not key.strip():
            raise ServerFormError(f"{what}, line {n}: write it as NAME{sep}value")
        out[key.strip()] = value.strip() if sep == ":" else value
    return tuple(out.items())


def _lines(pairs: Iterable[tuple[str, str]], sep: str) -> str:
    return "\n".join(f"{k}{sep}{v}" for k, v in pairs)


class McpServerDialog(QDialog):
    def __init__(self, server: ServerConfig | None = None, taken: Iterable[str] = (), parent=None):
        super().__init__(parent)
        self.setWindowTitle("Edit MCP server" if server else "Add MCP server")
        self._original = server
        self._taken = {n for n in taken if server is None or n != server.name}
        self.server: ServerConfig | None = None  # set on OK
        s = server or ServerConfig(name="")
        self.name = QLineEdit(s.name)
        self.name.setPlaceholderText("time")
        self.kind = QComboBox()
        for key, label in KINDS:
            self.kind.addItem(label, key)
        self.kind.setCurrentIndex(1 if s.url else 0)
        self.command = QLineEdit(s.command or "")
        self.command.setPlaceholderText("uvx, npx, or a program's full path")
        browse = QPushButton("Choose…")
        browse.clicked.connect(self._choose_command)
        command_row = QHBoxLayout()
        command_row.addWidget(self.command, 1)
        command_row.addWidget(browse)
        self.args = QLineEdit(shlex.join(s.args))
        self.args.setPlaceholderText("mcp-server-time --local-timezone Europe/Paris")
        self.args.setToolTip("Split as a shell splits a line: quote an argument that holds spaces")
        self.env = QPlainTextEdit(_lines(s.env, "="))
        self.env.setPlaceholderText("API_KEY=…   (one a line)")
        self.env.setMaximumHeight(72)
        self.url = QLineEdit(s.url or "")
        self.url.setPlaceholderText("http://127.0.0.1:8000/mcp")
        self.headers = QPlainTextEdit(_lines(s.headers, ": "))
        self.headers.setPlaceholderText("Authorization: Bearer …   (one a line)")
        self.headers.setMaximumHeight(72)
        self.timeout = QDoubleSpinBox()
        self.timeout.setRange(1, 3600)
        self.timeout.setDecimals(0)
        self.timeout.setSuffix(" s")
        self.timeout.setValue(s.timeout_s)
        self.timeout.setToolTip("A call that takes longer is ended and the model told it timed out")
        self.trusted = QCheckBox("Trusted: run its tools without asking each time")
        self.trusted.setChecked(s.trusted)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Kind", self.kind)
        form.addRow("Command", command_row)
        form.addRow("Arguments", self.args)
        form.addRow("Environment", self.env)
        form.addRow("URL", self.url)
        form.addRow("Headers", self.headers)
        form.addRow("Call timeout", self.timeout)
        form.addRow(self.trusted)
        self._form = form
        self.kind.currentIndexChanged.connect(self._show_kind)
        self.error = LevelLabel()
        self.error.set_level("error")
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        note = QLabel("The command and its arguments as a server's README gives them, or its URL.")
        note.setWordWrap(True)
        lay.addWidget(note)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)
        self._show_kind()

    def _show_kind(self, _i: int = 0) -> None:
        stdio = self.kind.currentData() == "stdio"
        for row, on in ((2, stdio), (3, stdio), (4, stdio), (5, not stdio), (6, not stdio)):
            self._form.setRowVisible(row, on)

    def _choose_command(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Server program", self.command.text())
        if path:
            self.command.setText(path)

    def value(self) -> ServerConfig:
        """The server the fields describe (ServerFormError: the first field that cannot be used)."""
        name = self.name.text().strip()
        if not name:
            raise ServerFormError("give the server a name (it names its tools in the chat)")
        if name in self._taken:
            raise ServerFormError(f"a server named {name!r} is already configured")
        if self.kind.currentData() == "stdio":
            command = self.command.text().strip()
            if not command:
                raise ServerFormError("give the command that starts the server (e.g. uvx)")
            try:
                args = tuple(shlex.split(self.args.text()))
            except ValueError as e:
                raise ServerFormError(f"the arguments cannot be split: {e}") from None
            env = _pairs(self.env.toPlainText(), "=", "environment")
            where = dict(command=command, args=args, env=env, url=None, headers=())
        else:
            url = self.url.text().strip()
            if not url.startswith(("http://", "https://")):
                raise ServerFormError("the URL must start with http:// or https://")
            where = dict(command=None, args=(), env=(), url=url,
                         headers=_pairs(self.headers.toPlainText(), ":", "headers"))
        base = self._original or ServerConfig(name=name)
        return replace(base, name=name, timeout_s=float(self.timeout.value()),
                       trusted=self.trusted.isChecked(), **where)  # type: ignore[arg-type]

    def accept(self) -> None:
        try:
            self.server = self.value()
        except ServerFormError as e:
            self.error.setText(str(e))
            self.error.show()
            return
        super().accept()
