"""The gauges' small painted parts: big numerics, the KV bar and the bandwidth bar.

These are a handful of rectangles and a line of text each; a plotting widget
would add axes nobody reads here. Colours come from the palette, so they follow
light and dark themes; a bar's empty part is a tint of the text colour over the
base, because the Base colour alone nearly vanishes against a dark window.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPalette, QPen
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.engine.stats import Figure
from app.ui.widgets.colors import CACHED, CEILING, GENERATED, NEW


class BigNumber(QFrame):
    """A caption, a large value and its unit; the tooltip says what the number means."""

    def __init__(self, caption: str, unit: str, explain: str, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.unit = unit
        self._shown_unit = unit
        self.caption = QLabel(caption)
        self.value = QLabel("–")
        self.unit_label = QLabel(unit)
        font = QFont(self.value.font())
        font.setPointSizeF(font.pointSizeF() * 1.9)
        font.setBold(True)
        self.value.setFont(font)
        for lab in (self.caption, self.unit_label):  # a role, so a palette change recolours them
            lab.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        col = QVBoxLayout(self)
        col.setContentsMargins(6, 4, 6, 4)
        col.setSpacing(0)
        for lab in (self.caption, self.value, self.unit_label):
            lab.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            col.addWidget(lab)
        self.setToolTip(explain)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def set_value(self, text: str | None, unit: str | None = None, aside: str = "") -> None:
        """`aside`: said after the unit ("ms · 16 tok"), not part of the figure."""
        self.value.setText(text or "–")
        self._shown_unit = unit or self.unit
        self.unit_label.setText(self._shown_unit + (f" · {aside}" if aside else ""))

    def set_figure(self, fig: Figure | None, aside: str = "") -> None:
        """A figure as ReplyStats formats it (the footer's), or "–"."""
        self.set_value(fig.value if fig else None, fig.unit if fig else None, aside)

    def text(self) -> str:
        """As read aloud: "1268 ms"."""
        v = self.value.text()
        return v if v == "–" else f"{v} {self._shown_unit}"


class _Bar(QWidget):
    """A full-width strip on the Base colour with a Mid border; subclasses draw inside it."""

    def __init__(self, height: int, parent=None):
        super().__init__(parent)
        self._height = height
        self.setMinimumHeight(height - 2)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(200, self._height)

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        pal = self.palette()
        p.fillRect(r, track(pal))
        self.draw(p, r, pal)
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid)))
        p.drawRect(r)
        p.end()

    def draw(self, p: QPainter, r: QRectF, pal: QPalette) -> None:
        raise NotImplementedError


def track(pal: QPalette) -> QColor:
    """A bar's empty part: 15% of the text colour over the base, visible in light and dark."""
    base, text = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
    mix = 0.15
    return QColor.fromRgbF(*(b + (t - b) * mix for b, t in ((base.redF(), text.redF()),
                                                          (base.greenF(), text.greenF()),
                                                          (base.blueF(), text.blueF()))))


class KvBar(_Bar):
    """used / n_ctx, split into cached prefix, newly prefilled prompt, generated."""

    def __init__(self, parent=None):
        super().__init__(18, parent)
        self.cached = self.new = self.generated = 0
        self.n_ctx = 0

    def set_values(self, cached: int, new: int, generated: int, n_ctx: int) -> None:
        vals = (cached, new, generated, n_ctx)
        if vals != (self.cached, self.new, self.generated, self.n_ctx):
            self.cached, self.new, self.generated, self.n_ctx = vals
            self.update()

    def draw(self, p: QPainter, r: QRectF, pal: QPalette) -> None:
        if self.n_ctx <= 0:
            return
        x = r.left()
        for n, color in ((self.cached, CACHED), (self.new, NEW), (self.generated, GENERATED)):
            w = r.width() * min(n, self.n_ctx) / self.n_ctx
            if w > 0:
                p.fillRect(QRectF(x, r.top(), min(w, r.right() - x), r.height()), color)
                x += w


class CeilingBar(_Bar):
    """A rate on a tok/s scale with the ceiling marked: how far below the limit decoding runs.

    The scale ends past the ceiling, so a model that fits in the CPU's caches
    (and beats the memory's peak) still shows where it stands."""

    def __init__(self, parent=None):
        super().__init__(22, parent)
        self.rate: float | None = None
        self.ceiling: float | None = None
        self.share: float | None = None

    def set_values(self, rate: float | None, ceiling: float | None, share: float | None = None) -> None:
        """`share`: of the peak, the figure the line below shows (the rate over the ceiling is the
        same quantity; given, it is that very number)."""
        if share is None and rate and ceiling:
            share = rate / ceiling
        if (rate, ceiling, share) != (self.rate, self.ceiling, self.share):
            self.rate, self.ceiling, self.share = rate, ceiling, share
            self.update()

    def draw(self, p: QPainter, r: QRectF, pal: QPalette) -> None:
        if not self.ceiling:
            return
        scale = max(self.ceiling / 0.85, (self.rate or 0) * 1.05)
        if self.rate:
            p.fillRect(QRectF(r.left(), r.top(), r.width() * min(self.rate / scale, 1.0), r.height()),
                       GENERATED)
        x = r.left() + r.width() * self.ceiling / scale
        p.setPen(QPen(CEILING, 2))
        p.drawLine(int(x), int(r.top()), int(x), int(r.bottom()))
        p.setPen(pal.color(QPalette.ColorRole.Text))
        share = f"{100 * self.share:.0f}% of peak" if self.rate and self.share is not None else "ceiling"
        p.drawText(r.adjusted(4, 0, -4, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, share)
