"""The settings dialog: edits a copy of AppConfig; the window decides what applies.

Sampling settings apply to the next reply. Context length, GPU layers and
threads are fixed when llama.cpp builds its context, so the window says a
reload is needed instead of pretending they took effect.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.config import AppConfig
from app.engine import prompt_cache
from app.engine.prompt import TranscriptFormat
from app.ui.settings.hardware import HardwarePanel


def _spin(lo: int, hi: int, value: int, special: str = "") -> QSpinBox:
    w = QSpinBox()
    w.setRange(lo, hi)
    w.setValue(value)
    if special:
        w.setSpecialValueText(special)
    return w


def _dspin(lo: float, hi: float, value: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    w = QDoubleSpinBox()
    w.setRange(lo, hi)
    w.setDecimals(decimals)
    w.setSingleStep(step)
    w.setValue(value)
    return w


class SettingsDialog(QDialog):
    def __init__(self, cfg: AppConfig, parent=None, report=None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._cfg = cfg
        self.n_ctx = _spin(256, 1 << 20, cfg.n_ctx)
        self.n_ctx.setSingleStep(256)
        self.gpu_layers = _spin(-1, 999, cfg.n_gpu_layers, "all")
        self.threads = _spin(0, 512, cfg.n_threads, "auto")
        self.threads.setToolTip("auto: prefill on every core, decode on all but one, so the window keeps "
                                "a core to paint with (decode is bound by memory, not cores). A number "
                                "sets both.")
        self.temperature = _dspin(0, 5, cfg.temperature, 0.05)
        self.top_p = _dspin(0.01, 1, cfg.top_p, 0.01)
        self.top_k = _spin(0, 1000, cfg.top_k, "off")
        self.min_p = _dspin(0, 1, cfg.min_p, 0.01)
        self.repeat_penalty = _dspin(0.5, 3, cfg.repeat_penalty, 0.05)
        self.seed = _spin(-1, 2**31 - 1, cfg.seed, "random")
        self.max_tokens = _spin(1, 1 << 20, cfg.max_tokens)
        self.dry = _dspin(0, 5, cfg.dry_multiplier, 0.1)
        self.dry.setSpecialValueText("off")
        self.dry.setToolTip("DRY: penalizes repeating a run of earlier text, the prompt included")
        self.preamble = QCheckBox("Frame models without a chat template with this preamble")
        self.preamble.setChecked(cfg.preamble)
        self.preamble_text = QPlainTextEdit(TranscriptFormat.preamble_text())
        self.preamble_text.setReadOnly(True)
        self.preamble_text.setMaximumHeight(96)
        self.preamble_text.setToolTip("Sent before the conversation; a system prompt replaces its first "
                                      "sentence. Models with a chat template get their template only.")
        self.preamble.toggled.connect(self.preamble_text.setEnabled)
        self.preamble_text.setEnabled(cfg.preamble)
        form = QFormLayout()
        note = QLabel("<i>Changing these reloads the model:</i>")
        form.addRow(note)
        for label, w in (("Context length", self.n_ctx), ("GPU layers", self.gpu_layers),
                         ("Threads", self.threads)):
            form.addRow(label, w)
        form.addRow(QLabel("<i>Applied to the next reply:</i>"))
        sampling: tuple[tuple[str, QWidget], ...] = (
            ("Temperature", self.temperature), ("Top-p", self.top_p), ("Top-k", self.top_k),
            ("Min-p", self.min_p), ("Repeat penalty", self.repeat_penalty), ("Seed", self.seed),
            ("Max tokens", self.max_tokens), ("DRY", self.dry))
        for label, field_widget in sampling:
            form.addRow(label, field_widget)
        form.addRow(self.preamble)
        form.addRow(self.preamble_text)
        self.cache_label = QLabel()
        self.clear_cache_button = QPushButton("Clear")
        self.clear_cache_button.setToolTip("Delete the saved prompt prefixes (rebuilt as chats start)")
        self.clear_cache_button.clicked.connect(self.clear_prompt_cache)
        cache_row = QHBoxLayout()
        cache_row.addWidget(self.cache_label, 1)
        cache_row.addWidget(self.clear_cache_button)
        form.addRow("Prompt cache", cache_row)
        self._show_cache()
        self.error = QLabel()
        self.error.setStyleSheet("color: #c0392b;")
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        self.hardware = HardwarePanel(report)  # read-only: where the loaded model runs
        lay.addWidget(self.hardware)
        lay.addWidget(self.error)
        lay.addWidget(buttons)
        self.result_config: AppConfig | None = None

    def value(self) -> AppConfig:
        return replace(
            self._cfg, n_ctx=self.n_ctx.value(), n_gpu_layers=self.gpu_layers.value(),
            n_threads=self.threads.value(), temperature=self.temperature.value(),
            top_p=self.top_p.value(), top_k=self.top_k.value(), min_p=self.min_p.value(),
            repeat_penalty=self.repeat_penalty.value(), seed=self.seed.value(),
            max_tokens=self.max_tokens.value(), dry_multiplier=self.dry.value(),
            preamble=self.preamble.isChecked(),
        )

    def _show_cache(self) -> None:
        size, files = prompt_cache.cache_usage()
        entries = files // 2  # a state file and its sidecar
        plural = "es" if entries != 1 else ""
        self.cache_label.setText(f"{size / 1e6:.1f} MB in {entries} saved prefix{plural} "
                                 "(the preamble and system prompts, kept across restarts)")
        self.clear_cache_button.setEnabled(files > 0)

    def clear_prompt_cache(self) -> None:
        prompt_cache.clear_cache()
        self._show_cache()

    def _accept(self) -> None:
        cfg = self.value()
        try:
            cfg.validate()
        except ValueError as e:
            self.error.setText(str(e))
            self.error.show()
            return
        self.result_config = cfg
        self.accept()
