"""The settings dialog: edits a copy of AppConfig; the window decides what applies.

Sampling settings apply to the next reply. Context length, GPU layers and
threads are fixed when llama.cpp builds its context, so the window says a
reload is needed instead of pretending they took effect. Every setting says
what it does in plain words, a line under it and more on hover, because
"Top-p" or "Min-p" mean nothing to someone who has not read a sampling
paper; GPU layers is greyed out on a llama.cpp build that cannot offload,
which the Hardware section below says, rather than offered and ignored.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.config import THEMES, AppConfig
from app.engine import backend, prompt_cache
from app.engine.prompt import TranscriptFormat
from app.ui.settings.hardware import HardwarePanel
from app.ui.settings.mcp_page import McpPage
from app.ui.widgets.levels import LevelLabel

# (label, what it does in a line, more on hover)
HINTS = {
    "Context length": ("How much text the model keeps in view, in tokens: the chat so far plus the "
                       "reply.", "Longer remembers more of the conversation and needs more memory; "
                       "older messages are left out when it is full (they are marked)."),
    "GPU layers": ("How many of the model's layers run on the GPU (all: every one that fits).",
                   "The rest run on the CPU. 0 keeps the whole model on the CPU."),
    "Threads": ("CPU cores used; auto leaves one free so the window stays smooth.",
                "auto: prefill on every core, decode on all but one, so the window keeps a core to "
                "paint with (decode is bound by memory, not cores). A number sets both."),
    "Temperature": ("How adventurous the wording is: 0 always takes the likeliest word.",
                    "Higher values pick less likely words more often: more varied, less predictable."),
    "Top-p": ("Choose only among the likeliest words that together cover this share.",
              "0.95: the long tail of unlikely words making up the last 5% is never picked. 1: off."),
    "Top-k": ("Choose only among this many likeliest words.", "off: no limit on the number of words."),
    "Min-p": ("Skip words far less likely than the best one.",
              "0.05: a word under 5% of the likeliest word's chance is never picked. 0: off."),
    "Repeat penalty": ("Above 1, words used recently become less likely.",
                       "Helps a model that loops on the same phrase; too high and it avoids words it "
                       "needs."),
    "Seed": ("random: a new draw each reply; a number gives the same reply to the same prompt.",
             "With a fixed seed and the same settings, a reply can be reproduced."),
    "Max tokens": ("The longest a reply may get, in tokens (a token is about ¾ of a word).",
                   "The reply stops there even mid-sentence; the footer then says 'max tokens reached'."),
    "DRY": ("Discourages repeating a run of earlier text, the prompt included.",
            "DRY: penalizes repeating a run of earlier text, the prompt included. off: 0."),
    "Speculative": ("Guesses the next tokens and checks them in one pass of the model: the same "
                    "reply, sooner when the guesses are right.",
                    "Prompt lookup guesses from the conversation's own text (rewrites, fixes, "
                    "edits); a draft model guesses with a smaller model of the same vocabulary "
                    "(loaded with the model). It measures itself and steps aside for the rest of a "
                    "reply it does not speed up; the gauges say so. Local models only."),
    "Appearance": ("The window's colours: Light, Dark, or the desktop's (System).",
                   "Applied at once to every window."),
}
THEME_LABELS = {"system": "System", "light": "Light", "dark": "Dark"}


def _hinted(widget: QWidget, hint: str, tip: str) -> QWidget:
    """The field with its one-line hint under it, muted; both say more on hover."""
    box = QWidget()
    col = QVBoxLayout(box)
    col.setContentsMargins(0, 0, 0, 2)
    col.setSpacing(0)
    col.addWidget(widget)
    line = QLabel(hint)
    line.setWordWrap(True)
    line.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    small = line.font()
    small.setPointSizeF(small.pointSizeF() * 0.9)
    line.setFont(small)
    col.addWidget(line)
    for w in (widget, line):
        w.setToolTip(tip)
    return box


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
    def __init__(self, cfg: AppConfig, parent=None, report=None, mcp=None, count_tokens=None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._cfg = cfg
        self.n_ctx = _spin(256, 1 << 20, cfg.n_ctx)
        self.n_ctx.setSingleStep(256)
        self.gpu_layers = _spin(-1, 999, cfg.n_gpu_layers, "all")
        self.threads = _spin(0, 512, cfg.n_threads, "auto")
        offload = report.gpu_offload_supported if report is not None else backend.gpu_offload_supported()
        if not offload:  # a CPU build: the setting would be ignored, so it is not offered
            self.gpu_layers.setEnabled(False)
        self.theme = QComboBox()
        for key in THEMES:
            self.theme.addItem(THEME_LABELS[key], key)
        self.theme.setCurrentIndex(THEMES.index(cfg.theme))
        self.temperature = _dspin(0, 5, cfg.temperature, 0.05)
        self.top_p = _dspin(0.01, 1, cfg.top_p, 0.01)
        self.top_k = _spin(0, 1000, cfg.top_k, "off")
        self.min_p = _dspin(0, 1, cfg.min_p, 0.01)
        self.repeat_penalty = _dspin(0.5, 3, cfg.repeat_penalty, 0.05)
        self.seed = _spin(-1, 2**31 - 1, cfg.seed, "random")
        self.max_tokens = _spin(1, 1 << 20, cfg.max_tokens)
        self.dry = _dspin(0, 5, cfg.dry_multiplier, 0.1)
        self.dry.setSpecialValueText("off")
        self.speculative = QComboBox()
        for key, label in (("off", "Off"), ("ngram", "Prompt lookup (n-gram)"), ("draft", "Draft model")):
            self.speculative.addItem(label, key)
        self.speculative.setCurrentIndex(max(0, self.speculative.findData(cfg.speculative)))
        self.draft_model = QLineEdit(cfg.draft_model or "")
        self.draft_model.setPlaceholderText("a smaller GGUF with this model's vocabulary")
        self.draft_browse = QPushButton("Choose…")
        self.draft_browse.clicked.connect(self._choose_draft)
        self.speculative.currentIndexChanged.connect(self._draft_enabled)
        self._draft_enabled()
        self.preamble = QCheckBox("Frame models without a chat template with this preamble")
        self.preamble.setChecked(cfg.preamble)
        self.preamble_text = QPlainTextEdit(TranscriptFormat.preamble_text())
        self.preamble_text.setReadOnly(True)
        self.preamble_text.setMaximumHeight(96)
        self.preamble_text.setToolTip("Sent before the conversation; a system prompt replaces its first "
                                      "sentence. Models with a chat template get their template only.")
        self.preamble.toggled.connect(self.preamble_text.setEnabled)
        self.preamble_text.setEnabled(cfg.preamble)
        gpu_hint = HINTS["GPU layers"] if offload else (
            "Not used: this llama.cpp build runs on the CPU only (see Hardware below).",
            "A llama.cpp built with CUDA, Metal or Vulkan can run layers on a GPU.")
        replies = QFormLayout()
        replies.addRow(QLabel("<i>Applied to the next reply.</i>"))
        sampling: tuple[tuple[str, QWidget], ...] = (
            ("Temperature", self.temperature), ("Top-p", self.top_p), ("Top-k", self.top_k),
            ("Min-p", self.min_p), ("Repeat penalty", self.repeat_penalty), ("Seed", self.seed),
            ("Max tokens", self.max_tokens), ("DRY", self.dry))
        for label, field_widget in sampling:
            replies.addRow(label, _hinted(field_widget, *HINTS[label]))
        model = QFormLayout()
        model.addRow(QLabel("<i>Changing these reloads the model.</i>"))
        for label, w in (("Context length", self.n_ctx), ("GPU layers", self.gpu_layers),
                         ("Threads", self.threads)):
            model.addRow(label, _hinted(w, *(gpu_hint if label == "GPU layers" else HINTS[label])))
        model.addRow("Speculative", _hinted(self.speculative, *HINTS["Speculative"]))
        draft_row = QHBoxLayout()
        draft_row.addWidget(self.draft_model, 1)
        draft_row.addWidget(self.draft_browse)
        model.addRow("Draft model", draft_row)
        self.hardware = HardwarePanel(report)  # read-only: where the loaded model runs
        model.addRow(self.hardware)
        # A column, not a form: a form row gave the cache's wrapped words one line's height and
        # cut them top and bottom; in a box layout a wrapping label gets the height its width needs.
        prompt = QVBoxLayout()
        prompt.addWidget(self.preamble)
        prompt.addWidget(self.preamble_text)
        self.cache_label = QLabel()
        self.cache_label.setWordWrap(True)
        self.clear_cache_button = QPushButton("Clear")
        self.clear_cache_button.setToolTip("Delete the saved prompt prefixes (rebuilt as chats start)")
        self.clear_cache_button.clicked.connect(self.clear_prompt_cache)
        cache_box = QGroupBox("Prompt cache")
        cache_row = QHBoxLayout(cache_box)
        cache_row.addWidget(self.cache_label, 1)
        cache_row.addWidget(self.clear_cache_button, 0, Qt.AlignmentFlag.AlignTop)
        prompt.addWidget(cache_box)
        prompt.addStretch(1)
        self._show_cache()
        look = QFormLayout()
        look.addRow("Theme", _hinted(self.theme, *HINTS["Appearance"]))
        self.tabs = QTabWidget()  # one screenful each, so the dialog fits a 600-pixel-high screen
        pages: tuple[tuple[str, QLayout], ...] = (("Replies", replies), ("Model", model), ("Prompt", prompt),
                                                  ("Appearance", look))
        for title, form in pages:
            page = QWidget()
            page.setLayout(form)
            self.tabs.addTab(page, title)
        # MCP servers (`mcp`: the window's McpRunner): saved to mcp.json as they change, apart from OK/Cancel
        self.mcp = McpPage(mcp, count_tokens)
        self.tabs.addTab(self.mcp, "Tools")
        self.finished.connect(lambda _r: self.mcp.stop())
        self.error = LevelLabel()  # red that reads on the theme showing, chosen again on a switch
        self.error.set_level("error")
        self.error.setWordWrap(True)
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.tabs)
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
            preamble=self.preamble.isChecked(), theme=self.theme.currentData(),
            speculative=self.speculative.currentData(), draft_model=self.draft_model.text().strip() or None,
        )

    def _draft_enabled(self) -> None:
        on = self.speculative.currentData() == "draft"
        self.draft_model.setEnabled(on)
        self.draft_browse.setEnabled(on)

    def _choose_draft(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Draft model", self.draft_model.text(),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            self.draft_model.setText(path)

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
