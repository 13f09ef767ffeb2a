"""The top bar: which model, its load progress, what it runs on, and toggles.

"Runs on" is always visible, and a GPU load that fell back to the CPU is shown
in warning colours, not buried in a log: GPT4All's silent fallback is the
complaint this answers. The line says it short (the device, the context, the
threads) with the whole story on hover, and gives way before the model's name
when the window is narrow: it is cut with "…" (the whole line then on hover too),
never drawn over the Stream box, and a warning at its end is kept whole. Its
warning and error colours are the palette's of the moment (app.ui.widgets.levels),
drawn again on a PaletteChange, so a theme switch leaves none unreadable.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QWidget,
)

from app.config import SavedEndpoint
from app.engine.models import ModelInfo, default_model_path, discover
from app.ui.widgets.levels import coloured
from app.ui.widgets.one_line import RichLineLabel

DEFAULT_LABEL = "Gemma 3 270M (bundled default)"


def _describe(info: ModelInfo) -> str:
    size = f"{info.size / 1e9:.1f} GB" if info.size >= 1e9 else f"{info.size / 1e6:.0f} MB"
    if info.error:
        return f"{info.file} — unusable: {info.error}"
    return f"{info.file} · {info.quantization} · {size}"


class ModelBar(QWidget):
    model_chosen = Signal(object)  # str path, None for the default model, or a SavedEndpoint
    settings_clicked = Signal()
    connect_clicked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(len(DEFAULT_LABEL))
        self.combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.combo.activated.connect(self._on_activated)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("Load a GGUF file from disk")
        self.open_button.clicked.connect(self._browse)
        self.connect_button = QPushButton("Connect…")
        self.connect_button.setToolTip("Chat through an OpenAI-compatible server\n"
                                       "(llama-server, vLLM, Ollama, ...)")
        self.connect_button.clicked.connect(self.connect_clicked)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(140)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status = RichLineLabel("no model")  # cut with "…" when narrow, never mid-word unmarked
        self.status.setMinimumWidth(120)
        self.streaming = QCheckBox("Stream")
        self.streaming.setToolTip("Show the reply as it is generated (Ctrl+Shift+S).\n"
                                  "Off: wait for the whole reply, then show it at once.")
        self.settings_button = QPushButton("Settings")
        self.settings_button.setToolTip("Settings (Ctrl+,)")
        self.settings_button.clicked.connect(self.settings_clicked)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Model"))
        row.addWidget(self.combo, 3)
        row.addWidget(self.open_button)
        row.addWidget(self.connect_button)
        row.addWidget(self.progress)
        row.addWidget(self.status, 2)
        row.addWidget(self.streaming)
        row.addWidget(self.settings_button)
        self._paths: list[str | SavedEndpoint | None] = []
        self._status: tuple[str, str, str] = ("no model", "", "")  # plain part, marked part, its level

    def refresh(self, current: str | SavedEndpoint | None, extra: Sequence[str] = (),
                endpoints: Sequence[SavedEndpoint] = ()) -> None:
        """List the default model, every discovered GGUF and the saved servers; select `current`."""
        self.combo.clear()
        self._paths = [None]
        self.combo.addItem(DEFAULT_LABEL)
        for ep in endpoints:
            self._paths.append(ep)
            self.combo.addItem(f"Server: {ep.label}")
        default = str(default_model_path().resolve())
        infos = discover([p for p in [*extra, current] if isinstance(p, str)])
        for info in infos:
            if info.path == default:
                continue
            self._paths.append(info.path)
            self.combo.addItem(_describe(info))
            self.combo.setItemData(self.combo.count() - 1, info.path)
        self.select(current)

    def entries(self) -> list[tuple[str, str | SavedEndpoint | None]]:
        """(label, what it loads) for each entry of the picker, in its order."""
        return [(self.combo.itemText(i), item) for i, item in enumerate(self._paths)]

    def select(self, path: str | SavedEndpoint | None) -> None:
        if isinstance(path, SavedEndpoint):
            for i, p in enumerate(self._paths):
                if isinstance(p, SavedEndpoint) and p.base_url == path.base_url:
                    self.combo.setCurrentIndex(i)
                    return
            return
        want = str(Path(path).expanduser().resolve()) if path else None
        if want == str(default_model_path().resolve()):
            want = None
        for i, p in enumerate(self._paths):
            if p == want:
                self.combo.setCurrentIndex(i)
                return

    def _on_activated(self, index: int) -> None:
        if 0 <= index < len(self._paths):
            self.model_chosen.emit(self._paths[index])

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a GGUF model", "",
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.model_chosen.emit(path)

    def set_loading(self, name: str) -> None:
        self.progress.setRange(0, 0)  # busy until llama.cpp returns (it reports no progress)
        self.progress.show()
        self._say(html.escape(f"loading {name}…"))
        self.status.set_details("")  # the last model's story no longer holds
        self.combo.setEnabled(False)
        self.open_button.setEnabled(False)
        self.connect_button.setEnabled(False)

    def set_assembly_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self._say(f"preparing the default model… {100 * done // max(total, 1)}%")

    def set_loaded(self, report) -> None:
        """A LoadReport, or a RemoteReport (which says what runs where, and the context)."""
        self._loaded_state()
        if report.backend == "remote":
            self._say(f"<b>{html.escape(report.runs_on)}</b>")
            version = f" {report.version}" if report.version else ""
            self.status.set_details(f"{report.kind}{version} at {report.host}\nmodel {report.model_path}")
            return
        where = report.runs_on.split(" (")[0]  # "CPU", the why in the tooltip
        text = f"runs on <b>{html.escape(where)}</b> · ctx {report.n_ctx} · {report.threads_text}"
        if report.fallback:
            self._say(text + " · ", "<b>GPU fallback</b>", "warning")
        else:
            self._say(text)
        self.status.set_details(f"runs on {report.runs_on} · ctx {report.n_ctx} · {report.threads_text}\n"
                               + (report.fallback or f"loaded in {report.load_s:.2f} s\n{report.model_path}"))

    def set_failed(self) -> None:
        self._loaded_state()
        self.status.set_details("")
        self._say("", "no model loaded", "error")

    def _say(self, plain: str, marked: str = "", level: str = "") -> None:
        """The status line (rich text): `plain`, then `marked` in `level`'s colour."""
        self._status = (plain, marked, level)
        self.status.set_parts(plain, coloured(marked, level, self.palette()) if marked else "")

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange:
            self._say(*self._status)

    def _loaded_state(self) -> None:
        self.progress.hide()
        self.combo.setEnabled(True)
        self.open_button.setEnabled(True)
        self.connect_button.setEnabled(True)
