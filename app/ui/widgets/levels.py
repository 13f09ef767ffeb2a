"""Error, warning and info colours that read on whichever palette is showing.

One red on every theme was the message bar's way, and the orange of a
warning that reads on dark grey is unreadable on light grey (and the red of a
light theme too dim on dark). So a colour is asked for with the palette it
will be drawn on, each time it is drawn, and moved towards the text colour
until it has WCAG's contrast on the window's background: a widget that asks
in its paint or on its PaletteChange follows a theme switch by construction,
where a colour baked into a stylesheet when the widget was made stays in the
theme it was born in.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel

LIGHT = {"error": "#c0392b", "warning": "#9a5a00", "info": "#1f6fa8"}
DARK = {"error": "#ff7b72", "warning": "#f5b041", "info": "#7fb0ff"}
TEXT_RATIO = 4.5  # WCAG AA for text
MARK_RATIO = 3.0  # WCAG's ratio for a border or a mark that is not text


def luminance(c: QColor) -> float:
    ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
          for v in (c.redF(), c.greenF(), c.blueF())]
    return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]


def contrast(a: QColor, b: QColor) -> float:
    """WCAG's contrast ratio of two colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def is_dark(pal: QPalette) -> bool:
    return pal.color(QPalette.ColorRole.Window).lightness() < 128


def readable_on(color: QColor, bg: QColor, ratio: float = TEXT_RATIO) -> QColor:
    """`color` in its own hue, made lighter on a dark `bg` or darker on a light one until it
    has `ratio` of contrast there (or can go no further)."""
    out = QColor(color)
    dark_bg = bg.lightness() < 128
    for _ in range(40):
        if contrast(out, bg) >= ratio:
            break
        out = out.lighter(108) if dark_bg else out.darker(108)
    return out


def level_colour(level: str, pal: QPalette, ratio: float = TEXT_RATIO) -> QColor:
    """The colour of `level` ("error", "warning", "info"; anything else is the text's own) for
    drawing on `pal`'s window background now."""
    table = DARK if is_dark(pal) else LIGHT
    bg = pal.color(QPalette.ColorRole.Window)
    if level not in table:
        return pal.color(QPalette.ColorRole.WindowText)
    return readable_on(QColor(table[level]), bg, ratio)


def coloured(text_html: str, level: str, pal: QPalette) -> str:
    """Rich text of `text_html` in `level`'s colour on `pal` (for a label that holds rich text:
    set it again on PaletteChange)."""
    return f'<span style="color:{level_colour(level, pal).name()};">{text_html}</span>'


class LevelLabel(QLabel):
    """A plain-text label in its level's colour, chosen again on every PaletteChange (only its
    text role is its own: the rest of its palette stays the window's)."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.level = ""
        self._painting = False
        self._coloured = False  # a level's colour was set: "" then gives the palette back

    def set_level(self, level: str) -> None:
        self.level = level
        self._recolour()

    def _recolour(self) -> None:
        if self.level not in LIGHT and not self._coloured:
            return  # never coloured: the palette is left as whoever made the label set it
        self._coloured = self.level in LIGHT
        parent = self.parentWidget()
        base = QPalette(parent.palette() if parent is not None else self.palette())
        pal = QPalette()
        pal.setColor(QPalette.ColorRole.WindowText, level_colour(self.level, base))
        pal.setColor(QPalette.ColorRole.Text, level_colour(self.level, base))
        self._painting = True
        try:
            self.setPalette(pal if self.level in LIGHT else QPalette())
        finally:
            self._painting = False

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange and not self._painting:
            self._recolour()
