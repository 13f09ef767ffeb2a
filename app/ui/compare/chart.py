"""TTFT and decode rate per target as labelled horizontal bars, one panel each, with units.

Beside the table, so which target wins on each figure, and by how much, reads
at a glance; the exact numbers stay in the table. Bars numbered as the table's
rows (#1, #2...) rather than named, so a long target label never squeezes them.
"""

from __future__ import annotations

from typing import cast

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.ui.widgets.colors import GENERATED, TTFT


class CompareChart(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[tuple[str, float | None, float | None]] = []  # label, ttft ms, decode tok/s
        self.setMinimumSize(300, 80)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setMaximumHeight(self._height() + 8)

    def sizeHint(self) -> QSize:
        return QSize(520, self._height())

    def _height(self) -> int:
        """As tall as its bars need (a caption and one bar per target), not the window's rest."""
        return self.fontMetrics().height() + 12 + max(len(self.rows), 2) * 28

    def set_rows(self, rows) -> None:
        self.rows = list(rows)
        self.setMaximumHeight(self._height() + 8)
        self.updateGeometry()
        self.update()

    def paintEvent(self, _ev) -> None:
        p = QPainter(self)
        pal = self.palette()
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        if not self.rows:
            p.end()
            return
        text = pal.color(QPalette.ColorRole.Text)
        fm = p.fontMetrics()
        lh = fm.height()
        half = self.width() / 2
        for i, (title, idx, color, unit) in enumerate((("TTFT", 1, TTFT, "ms"),
                                                       ("decode rate", 2, GENERATED, "tok/s"))):
            x0 = 6 + i * half
            w = half - 12
            p.setPen(text)
            p.drawText(QRectF(x0, 2, w, lh), Qt.AlignmentFlag.AlignLeft, f"{title} ({unit})")
            vals = [cast(float | None, r[idx]) for r in self.rows]
            vmax = max((v for v in vals if v), default=0) or 1.0
            bar_h = max(8.0, min(24.0, (self.height() - lh - 8) / len(self.rows) - 4))
            label_w = fm.horizontalAdvance("#6 ")
            for k, v in enumerate(vals):
                y = lh + 6 + k * (bar_h + 4)
                p.setPen(text)
                p.drawText(QRectF(x0, y, label_w, bar_h), Qt.AlignmentFlag.AlignVCenter, f"#{k + 1}")
                if v is None:
                    p.drawText(QRectF(x0 + label_w, y, w - label_w, bar_h), Qt.AlignmentFlag.AlignVCenter,
                               "–")
                    continue
                span = (w - label_w - fm.horizontalAdvance("00000.0")) * v / vmax
                p.fillRect(QRectF(x0 + label_w, y, max(1.0, span), bar_h), color)
                p.drawText(QRectF(x0 + label_w + span + 4, y, w, bar_h), Qt.AlignmentFlag.AlignVCenter,
                           f"{v:.0f}" if unit == "ms" else f"{v:.1f}")
        p.end()
