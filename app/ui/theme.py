"""Light, Dark or System: the window's colours, as the settings choose.

Qt's Fusion style alone stays light whatever the desktop says (only a
platform theme such as gtk3 with Adwaita:dark turned it dark), so Light and
Dark set Fusion with a palette of their own, and System gives back the style
and palette the application started with (the desktop's). The choice is
applied to the whole application, so every window (Batch, Compare, Server,
the dialogs) follows, and widgets that paint from the palette (the gauges'
bars, the charts, the transcript, the message bar) recolour on the
PaletteChange Qt sends.

A widget with a stylesheet of its own is the exception: Qt's stylesheet style
hands it, and every child under it, the palette of the moment it was
polished, and an application palette change does not reach them (the
message bar's text stayed the old theme's colour on the new background).
Widgets here paint their colours from the palette instead of stylesheets;
`apply` polishes again the few stylesheets left, so they too take the new
palette.

Dark's colours are chosen for contrast on its own greys: a link (the code
block's Copy) is light blue, not Qt's default dark blue, and disabled text is
a mid grey rather than the light palette's.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

Role, Group = QPalette.ColorRole, QPalette.ColorGroup

DARK = {Role.Window: "#2b2b2b", Role.WindowText: "#e0e0e0", Role.Base: "#1e1e1e",
        Role.AlternateBase: "#333333", Role.ToolTipBase: "#3a3a3a", Role.ToolTipText: "#e0e0e0",
        Role.Text: "#e0e0e0", Role.Button: "#3a3a3a", Role.ButtonText: "#e0e0e0",
        Role.BrightText: "#ff6b6b", Role.Link: "#7fb0ff", Role.LinkVisited: "#c39bd3",
        Role.Highlight: "#3d6fb4", Role.HighlightedText: "#ffffff", Role.PlaceholderText: "#9a9a9a",
        Role.Light: "#4a4a4a", Role.Midlight: "#404040", Role.Mid: "#5a5a5a", Role.Dark: "#1a1a1a",
        Role.Shadow: "#000000", Role.Accent: "#3d6fb4"}
DARK_DISABLED = {Role.WindowText: "#7a7a7a", Role.Text: "#7a7a7a", Role.ButtonText: "#7a7a7a",
                 Role.Base: "#262626", Role.Button: "#303030", Role.Highlight: "#4a4a4a",
                 Role.PlaceholderText: "#666666"}

_started_with: tuple[str, QPalette] | None = None  # the style and palette before any choice
_applied = "system"


def dark_palette() -> QPalette:
    pal = QPalette()
    for role, color in DARK.items():
        pal.setColor(role, QColor(color))
    for role, color in DARK_DISABLED.items():
        pal.setColor(Group.Disabled, role, QColor(color))
    return pal


def light_palette() -> QPalette:
    style = QStyleFactory.create("Fusion")
    return style.standardPalette()


def current() -> str:
    return _applied


def apply(choice: str) -> bool:
    """Use `choice` ("system", "light" or "dark") for the whole application; True when the
    colours changed (the caller redraws what it drew in the old ones)."""
    global _started_with, _applied
    app = QApplication.instance()
    if not isinstance(app, QApplication) or choice == _applied:
        return False
    if _started_with is None:
        _started_with = (app.style().name(), QPalette(app.palette()))
    if choice == "system":
        name, pal = _started_with
        app.setStyle(name)
        app.setPalette(pal)
    else:
        app.setStyle("Fusion")
        app.setPalette(dark_palette() if choice == "dark" else light_palette())
    _repolish_stylesheets(app)
    _applied = choice
    return True


def _repolish_stylesheets(app: QApplication) -> None:
    for w in app.allWidgets():
        sheet = w.styleSheet()
        if sheet:
            w.setStyleSheet(sheet)  # the same sheet, set again: polished on the new palette
