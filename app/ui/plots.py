"""The gauges' two drawings, painted with QPainter (no plotting dependency).

Both are cheap to paint (a few rectangles, at most a few hundred line
segments), so repainting them at 10 Hz never competes with the transcript.
Colours come from the palette so they follow light and dark themes.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

CACHED = QColor("#5d8aa8")
NEW = QColor("#e39b3b")
GENERATED = QColor("#4caf50")
TTFT = QColor("#c0504d")


class KvBar(QWidget):
    """used / n_ctx, split into cached prefix, newly prefilled prompt, generated."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.cached = self.new = self.generated = 0
        self.n_ctx = 0
        self.setMinimumHeight(16)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(200, 18)

    def set_values(self, cached: int, new: int, generated: int, n_ctx: int) -> None:
        vals = (cached, new, generated, n_ctx)
        if vals != (self.cached, self.new, self.generated, self.n_ctx):
            self.cached, self.new, self.generated, self.n_ctx = vals
            self.update()

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        r = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        pal = self.palette()
        p.fillRect(r, pal.color(QPalette.ColorRole.Base))
        if self.n_ctx > 0:
            x = r.left()
            for n, color in ((self.cached, CACHED), (self.new, NEW), (self.generated, GENERATED)):
                w = r.width() * min(n, self.n_ctx) / self.n_ctx
                if w > 0:
                    p.fillRect(QRectF(x, r.top(), min(w, r.right() - x), r.height()), color)
                    x += w
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid)))
        p.drawRect(r)
        p.end()


def draw_series(p: QPainter, r: QRectF, pts: list[tuple[float, float]], muted: QColor) -> None:
    """A rate over time in `r`, scaled to its maximum, the last value and the maximum written."""
    if len(pts) < 2:
        return
    t0, t1 = pts[0][0], pts[-1][0]
    vmax = max(v for _, v in pts) * 1.15 or 1.0
    span = (t1 - t0) or 1.0
    poly = QPolygonF([QPointF(r.left() + r.width() * (t - t0) / span,
                              r.bottom() - r.height() * v / vmax) for t, v in pts])
    p.setPen(QPen(GENERATED, 1.6))
    p.drawPolyline(poly)
    p.setPen(muted)
    p.drawText(r.adjusted(3, 1, -3, -1), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop,
               f"{pts[-1][1]:.0f} (max {vmax / 1.15:.0f})")


class SeriesPlot(QWidget):
    """One titled rate over time (the Server panel's aggregate tok/s)."""

    def __init__(self, title: str, parent=None):
        super().__init__(parent)
        self.title = title
        self.series: list[tuple[float, float]] = []
        self.setMinimumSize(180, 90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_data(self, series) -> None:
        if series != self.series:
            self.series = series
            self.update()

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        lh = p.fontMetrics().height()
        r = QRectF(4, lh + 2, self.width() - 8, self.height() - lh - 6)
        p.setPen(pal.color(QPalette.ColorRole.Text))
        p.drawText(QPointF(4, lh - 3), self.title)
        p.setPen(QPen(muted, 1, Qt.PenStyle.DotLine))
        p.drawRect(r)
        draw_series(p, r, self.series[-600:], muted)
        p.end()


class RatePlot(QWidget):
    """Top: decode tok/s over the current reply. Bottom: TTFT and tok/s per turn."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.series: list[tuple[float, float]] = []
        self.turns: list[tuple[float | None, float | None]] = []
        self.setMinimumSize(180, 120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(260, 150)

    def set_data(self, series, turns) -> None:
        if series != self.series or turns != self.turns:
            self.series, self.turns = series, turns
            self.update()

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.Text)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        fm = p.fontMetrics()
        lh = fm.height()
        half = self.height() // 2
        top = QRectF(4, lh + 2, self.width() - 8, half - lh - 6)
        bottom = QRectF(4, half + lh + 2, self.width() - 8, self.height() - half - lh - 6)
        p.setPen(text)
        p.drawText(QPointF(4, lh - 3), "decode tok/s, this reply")
        p.drawText(QPointF(4, half + lh - 3), "per turn: ")
        x0 = 4 + fm.horizontalAdvance("per turn: ")
        p.setPen(TTFT)
        p.drawText(QPointF(x0, half + lh - 3), "TTFT")
        p.setPen(GENERATED)
        p.drawText(QPointF(x0 + fm.horizontalAdvance("TTFT  "), half + lh - 3), "tok/s")
        p.setPen(QPen(muted, 1, Qt.PenStyle.DotLine))
        p.drawRect(top)
        p.drawRect(bottom)
        self._draw_series(p, top, muted)
        self._draw_turns(p, bottom)
        p.end()

    def _draw_series(self, p: QPainter, r: QRectF, muted: QColor) -> None:
        draw_series(p, r, self.series[-300:], muted)

    def _draw_turns(self, p: QPainter, r: QRectF) -> None:
        turns = self.turns[-20:]
        if not turns:
            return
        tmax = max((t or 0) for t, _ in turns) or 1.0
        rmax = max((v or 0) for _, v in turns) or 1.0
        slot = r.width() / len(turns)
        bw = min(14.0, max(2.0, slot * 0.45))
        dots = []
        for i, (ttft, rate) in enumerate(turns):
            x = r.left() + slot * i + (slot - bw) / 2
            if ttft:
                h = r.height() * 0.9 * ttft / tmax
                p.fillRect(QRectF(x, r.bottom() - h, bw, h), TTFT)
            if rate:
                dots.append(QPointF(x + bw / 2, r.bottom() - r.height() * 0.9 * rate / rmax))
        p.setPen(QPen(GENERATED, 1.6))
        if len(dots) > 1:
            p.drawPolyline(QPolygonF(dots))
        p.setBrush(GENERATED)
        for d in dots:
            p.drawEllipse(d, 2.5, 2.5)
