"""Render resources/llamadesk.svg to the PNG sizes the .desktop file and bundle use.

Kept in the repo so the PNGs can be regenerated after the SVG changes, with
only what the app already depends on (Qt's own SVG renderer, offscreen), not
inkscape or rsvg. Usage: QT_QPA_PLATFORM=offscreen python packaging/render_icons.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SIZES = (16, 32, 48, 64, 128, 256)
RESOURCES = Path(__file__).resolve().parent.parent / "resources"


def render(svg: Path, out_dir: Path, sizes=SIZES) -> list[Path]:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG")
    written = []
    for size in sizes:
        img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(Qt.GlobalColor.transparent)
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(p)
        p.end()
        target = out_dir / f"llamadesk-{size}.png"
        if not img.save(str(target)):
            raise OSError(f"could not write {target}")
        written.append(target)
    return written


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    _app = QGuiApplication.instance() or QGuiApplication([])
    for path in render(RESOURCES / "llamadesk.svg", RESOURCES):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
