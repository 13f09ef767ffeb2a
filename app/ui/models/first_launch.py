"""The first launch on the bundled model: what that model is, in plain words, and a short list
of instruction-tuned models to download instead, each with its size and its fit here.

Tried as a newcomer would, the bundled Gemma 3 270M answers "Germany is the capital of
Germany", and nothing said why. It is there so the window works the moment it opens; the
panel says so, and that an instruction-tuned model is what a chat wants. Sizes start as the
catalogue's round figures and become the Hub's own, and each fit label is judged from the
model's real header (read with a ranged request, on the Hub thread) against the memory
free now; offline, the panel says the fit could not be checked rather than guess. A failure
of the Hub itself (offline, a mirror down) is the same for every offer, so the panel says it
once under them and each offer keeps only its size; one of a model's own (no such
repository, gated) stays beside that model.

At the window's smallest size (900 x 600) the panel once took 265 px and left the chat 70: it
now keeps to about a fifth of the column it sits in (enough for its first line and the first
offers), scrolls the rest, says the why of it below the offers rather than above them, and
folds to its first line with ▴ (✕ still closes it for good).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.gguf import human_size
from app.hub.api import endpoint
from app.ui.models.labels import fit_colour, fit_text
from app.ui.models.worker import Checked


@dataclass(frozen=True)
class Suggestion:
    title: str
    spec: str  # what `llamadesk pull` takes
    about: int  # bytes, the catalogue's figure until the Hub answers
    why: str


SUGGESTED = (
    Suggestion("Gemma 3 1B, instruction-tuned", "unsloth/gemma-3-1b-it-GGUF:Q4_K_M", 806_000_000,
               "quick on any laptop"),
    Suggestion("Qwen 2.5 1.5B Instruct", "Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M", 1_120_000_000,
               "good with code and lists"),
    Suggestion("Llama 3.2 3B Instruct", "bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", 2_020_000_000,
               "better answers, about half the speed"),
    Suggestion("Gemma 3 4B, instruction-tuned", "unsloth/gemma-3-4b-it-GGUF:Q4_K_M", 2_490_000_000,
               "the best of these; wants a few GB free"),
)


ERROR_CHARS = 48  # a fit that could not be checked says why in this much; the whole line on hover
INTRO = ("<b>The bundled model, Gemma 3 270M,</b> is a tiny <i>base</i> model: for real chats, "
         "download one of these instead.")
FOOTER = ("The bundled model (253 MB) is there so the app works the moment it opens; a base model continues "
          "text instead of following instructions, so its answers are often wrong or wander off. Downloads "
          "are checked against the Hub's sha256 and can be paused. Others: "
          '<a href="models:" style="color:{link};">Get models…</a> (Model menu). This note is shown once.')
SHARE = 0.22  # of the chat column's height, at most: the chat keeps the rest
LEAST = 96  # px: the panel's first line and an offer, however short the window
UNREACHABLE = "Fit not checked: the Hub cannot be reached ({why})"  # the endpoint it tried on hover


def _wrapping(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    return label


class _Scroll(QScrollArea):
    """As tall as its words at this width, and scrolled rather than cut when the window is small."""

    def sizeHint(self) -> QSize:
        w = self.widget()
        width = max(self.viewport().width(), 200)
        h = w.heightForWidth(width) if w.hasHeightForWidth() else w.sizeHint().height()
        return QSize(super().sizeHint().width(), h + 2 * self.frameWidth())

    def minimumSizeHint(self) -> QSize:
        return QSize(100, 60)

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self.updateGeometry()  # the height its words need changes with the width


class FirstLaunchPanel(QFrame):
    download_requested = Signal(str)  # a suggestion's spec
    models_requested = Signal()  # "Get models…": the Models window
    dismissed = Signal()

    def __init__(self, suggestions: tuple[Suggestion, ...] | None = None, parent=None):
        super().__init__(parent)
        self._column: QWidget | None = None  # whose height the panel keeps a share of
        self.folded = False  # down to its first line (▴)
        self.setObjectName("first-launch")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.suggestions = suggestions if suggestions is not None else SUGGESTED
        self.checked: dict[str, Checked] = {}
        self.intro = _wrapping(INTRO)
        self.footer = _wrapping()
        self.footer.linkActivated.connect(lambda _href: self.models_requested.emit())
        self.footer.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.unreachable = _wrapping()
        self.unreachable.setTextFormat(Qt.TextFormat.PlainText)
        self.unreachable.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.unreachable.setContentsMargins(6, 0, 0, 0)
        self.unreachable.hide()
        body = QWidget()
        col = QVBoxLayout(body)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(4)
        self.lines: list[QLabel] = []
        self.buttons: list[QPushButton] = []
        for s in self.suggestions:
            line = _wrapping()
            line.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            button = QPushButton("Download")
            button.setToolTip(f"Download {s.spec} in the Models window")
            button.clicked.connect(lambda _c=False, spec=s.spec: self.download_requested.emit(spec))
            row = QHBoxLayout()
            row.setContentsMargins(6, 0, 0, 0)
            row.addWidget(line, 1)
            row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
            col.addLayout(row)
            self.lines.append(line)
            self.buttons.append(button)
        col.addWidget(self.unreachable)
        col.addWidget(self.footer)
        self.scroller = _Scroll()
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setWidgetResizable(True)
        self.scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroller.setWidget(body)
        self.fold_button = QToolButton()
        self.fold_button.setAutoRaise(True)
        self.fold_button.clicked.connect(lambda: self.fold(not self.folded))
        self.close_button = QToolButton()
        self.close_button.setAutoRaise(True)
        self.close_button.setText("✕")
        self.close_button.setToolTip("Close (this is shown once)")
        self.close_button.clicked.connect(self._dismiss)
        top = QHBoxLayout()
        top.setSpacing(2)
        top.addWidget(self.intro, 1)
        top.addWidget(self.fold_button, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 4, 4, 4)
        lay.setSpacing(4)
        lay.addLayout(top)
        lay.addWidget(self.scroller, 1)
        self.fold(False)
        self._plain: list[str] = []
        self.refresh()

    def specs(self) -> list[str]:
        return [s.spec for s in self.suggestions]

    def set_checked(self, c: Checked) -> None:
        if c.spec in self.specs():
            self.checked[c.spec] = c
            self.refresh()

    def _hub_failure(self, c: Checked | None) -> str | None:
        """Why the Hub itself failed this check, or None. hub_errors names the endpoint,
        not the repository, when the request never got as far as a model."""
        where = f"{endpoint()}: "
        if c is None or c.fit is not None or not (c.error or "").startswith(where):
            return None
        return c.error.removeprefix(where)

    def _fit(self, s: Suggestion) -> tuple[str, str, str | None]:
        """(what the fit cell says, its whole story for the tooltip, its colour or None: muted);
        an empty cell when the Hub's own failure is said under the offers instead."""
        c = self.checked.get(s.spec)
        if c is None:
            return "checking the fit…", "Reading the model's header from the Hub", None
        if self._hub_failure(c) is not None:
            return "", c.error or "", None
        if c.fit is None:
            why = (c.error or "unknown").removeprefix(f"{s.spec.partition(':')[0]}: ")
            text = "fit not checked: " + (why if len(why) <= ERROR_CHARS else why[: ERROR_CHARS - 1] + "…")
            return text, c.error or "", None
        dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128
        text = fit_text(c.fit.label, c.fit.ram_needed, c.fit.ram_free)
        return text, c.fit.summary(), fit_colour(c.fit.label, dark=dark)

    def refresh(self) -> None:
        pal = self.palette()
        muted = pal.color(QPalette.ColorRole.PlaceholderText).name()
        self._plain = []
        failures: list[str] = []
        for s, line in zip(self.suggestions, self.lines):
            c = self.checked.get(s.spec)
            exact = c is not None and c.file is not None
            quant = c.file.quant if exact else (s.spec.partition(":")[2] or "Q4_K_M")
            size = f"{quant} · {human_size(c.file.size) if exact else 'about ' + human_size(s.about)}"
            fit, tip, colour = self._fit(s)
            shown = (f' · <span style="color:{colour or muted};">{html.escape(fit)}</span>' if fit else "")
            line.setText(f"<b>{html.escape(s.title)}</b> · {size}{shown}")
            line.setToolTip(f"{s.spec}: {s.why}\n{tip}")
            self._plain.append(f"{s.title} · {size}" + (f" · {fit}" if fit else ""))
            why = self._hub_failure(c)
            if why is not None and why not in failures:
                failures.append(why)
        self.unreachable.setText(UNREACHABLE.format(why="; ".join(failures)))
        self.unreachable.setToolTip("\n".join(f"{endpoint()}: {why}" for why in failures))
        self.unreachable.setVisible(bool(failures))
        link = pal.color(QPalette.ColorRole.Link)
        if pal.color(QPalette.ColorRole.Window).lightness() < 128 and link.lightness() < 150:
            link = link.lighter(170)
        self.footer.setText(FOOTER.format(link=link.name()))
        self.scroller.updateGeometry()

    def text(self) -> str:
        """Everything the panel says, as plain lines (for the tests and a screen reader's sake)."""
        said = [self.unreachable.text()] if not self.unreachable.isHidden() else []
        return "\n".join([self.intro.text(), *self._plain, *said, self.footer.text()])

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange:
            self.refresh()
        elif ev.type() == ev.Type.ParentChange:
            if self._column is not None:
                self._column.removeEventFilter(self)
            self._column = self.parentWidget()
            if self._column is not None:
                self._column.installEventFilter(self)
            self._keep_to_share()

    def fold(self, on: bool) -> None:
        """Down to its first line (the offers and the rest hidden), or open again."""
        self.folded = on
        self.scroller.setVisible(not on)
        self.fold_button.setText("▾" if on else "▴")
        self.fold_button.setToolTip("Show the models to download" if on else
                                    "Fold to one line (✕ closes it for good)")

    def _keep_to_share(self) -> None:
        if self._column is not None:
            self.setMaximumHeight(max(LEAST, int(SHARE * self._column.height())))

    def eventFilter(self, obj: QObject, ev: QEvent) -> bool:
        if obj is self._column and ev.type() == QEvent.Type.Resize:
            self._keep_to_share()
        return False

    def _dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()
