"""Guard against a Qt binding that leaks references to None.

PySide6 6.12.0 on CPython 3.11 decrements None's refcount on every call of a
method returning void; the window then aborts with "none_dealloc" a few
thousand paints into a long reply. pyproject excludes it; this fails fast if
such a build comes back.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QLabel


def test_void_qt_calls_keep_none_alive(qtbot):
    img = QImage(32, 32, QImage.Format.Format_ARGB32)
    label = QLabel()
    qtbot.addWidget(label)
    p = QPainter(img)
    try:
        before = sys.getrefcount(None)
        for _ in range(500):
            p.fillRect(QRectF(0, 0, 4, 4), QColor("red"))
            p.drawRect(QRectF(0, 0, 4, 4))
            label.setText("x")
        after = sys.getrefcount(None)
    finally:
        p.end()
    assert after - before > -50, f"None lost {before - after} references in 1,500 void calls"
