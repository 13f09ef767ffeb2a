"""Tooltips that wrap: Qt shows a plain-text tooltip on one line however long it is.

Several of the window's explanations run to a few sentences; as plain text
Qt drew them as single lines over 1,300 pixels wide. Qt wraps a rich-text
tooltip instead, so one application-wide event filter hands Qt any long
plain tooltip as a paragraph (its own line breaks kept), for every window
and dialog at once, without each tooltip having to be written as HTML.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QHelpEvent, Qt
from PySide6.QtWidgets import QApplication, QToolTip, QWidget

WRAP_OVER = 60  # characters: a shorter tooltip stays as it is
WIDTH_PX = 420


def as_paragraph(tip: str) -> str:
    body = html.escape(tip).replace("\n", "<br>")
    return f'<table width="{WIDTH_PX}" cellpadding="0" cellspacing="0"><tr><td>{body}</td></tr></table>'


class WrappedTooltips(QObject):
    def eventFilter(self, obj: QObject, ev: QEvent) -> bool:
        if ev.type() == QEvent.Type.ToolTip and isinstance(obj, QWidget) and isinstance(ev, QHelpEvent):
            tip = obj.toolTip()
            if len(tip) > WRAP_OVER and not Qt.mightBeRichText(tip):
                QToolTip.showText(ev.globalPos(), as_paragraph(tip), obj)
                return True
        return False


_installed: WrappedTooltips | None = None


def install() -> None:
    """Once per application; the filter lives as long as it does."""
    global _installed
    app = QApplication.instance()
    if _installed is None and app is not None:
        _installed = WrappedTooltips(app)
        app.installEventFilter(_installed)
