"""Markdown to the HTML subset QTextDocument understands.

The parse and the highlighting are app.rendering.markdown_html's, shared
with the HTML export, so the window and an exported page render a reply
alike; this module says only how QTextDocument is given a code block and a
table. Colours go inline (QTextDocument ignores <style> classes); each code
block gets a "Copy" link whose href carries the block's index, and the code
itself is returned alongside so the view can put exact text on the clipboard
(not text scraped from HTML).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from app.rendering.markdown_html import (
    DARK_STYLE,
    LIGHT_STYLE,
    HtmlRenderer,
    Rendered,
    markdown_parser,
)

__all__ = ["MarkdownRenderer", "Rendered", "Theme", "markdown_parser"]


@dataclass
class Theme:
    dark: bool = False
    code_bg: str = "#f4f4f4"
    muted: str = "#777777"
    link: str = "#2a6fdb"

    @property
    def pygments_style(self) -> str:
        return DARK_STYLE if self.dark else LIGHT_STYLE


class MarkdownRenderer(HtmlRenderer):
    # QTextDocument draws no table borders unless asked in attributes.
    table_open = '<table border="1" cellspacing="0" cellpadding="4">'

    def __init__(self, theme: Theme | None = None):
        super().__init__(inline=True)
        self.theme = theme or Theme()

    @property
    def theme(self) -> Theme:
        return self._theme

    @theme.setter
    def theme(self, theme: Theme) -> None:
        self._theme = theme
        self.style = theme.pygments_style

    def open_code_html(self, lang: str, placeholder: str) -> str:
        """The box of a code block still streaming, the same as a finished one's so it
        does not move when it closes; its text goes in where `placeholder` stands, and
        it has no Copy link yet (its code is not whole)."""
        return self.code_box(html.escape(placeholder), lang, None)

    def typed_code_html(self, code: str, lang: str, n: int) -> str:
        """A code block a person typed, in the same box as a reply's."""
        return self.code_box(self.highlight(code, lang), lang, n)

    def code_box(self, code_html: str, lang: str, n: int | None) -> str:
        t = self.theme
        label = html.escape(lang) if lang else "code"
        copy = "Copy" if n is None else f'<a href="copy:{n}" style="color:{t.link};">Copy</a>'
        # pre-wrap: a QTextDocument cannot scroll one box sideways, and a long line left
        # unwrapped widens the whole transcript; wrapped, the indentation still shows.
        return (
            f'<p style="margin-top:6px; margin-bottom:0px; color:{t.muted}; font-size:small;">'
            f'{label} &nbsp;{copy}</p>'
            f'<table width="100%" cellpadding="8" cellspacing="0" bgcolor="{t.code_bg}" '
            f'style="margin-bottom:6px;"><tr><td>'
            f'<pre style="margin:0px; font-family:monospace; white-space:pre-wrap;">{code_html}</pre>'
            f'</td></tr></table>'
        )
