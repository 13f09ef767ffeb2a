"""A push button with a menu whose text, past its width, is cut short of the menu arrow.

A push button, not a tool button: Fusion draws a tool button's menu arrow over
its last letters ("No tools" ran into it) and leaves no room for it in its
size, where a push button's size makes room for the arrow. The tools and the
presets choosers use it, and the actions row's "More".
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton, QStyle, QStyleOptionButton, QStylePainter


class MenuButton(QPushButton):
    def paintEvent(self, ev) -> None:
        opt = QStyleOptionButton()
        self.initStyleOption(opt)
        style = self.style()
        arrow = style.pixelMetric(QStyle.PixelMetric.PM_MenuButtonIndicator, opt, self)
        margin = 2 * style.pixelMetric(QStyle.PixelMetric.PM_ButtonMargin, opt, self)
        room = self.width() - arrow - margin - 2 * style.pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth)
        opt.text = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, max(room, 0))
        QStylePainter(self).drawControl(QStyle.ControlElement.CE_PushButton, opt)
