"""Markdown to the HTML subset QTextDocument understands.

markdown-it-py parses (CommonMark plus tables, no raw HTML: model output is
untrusted text; single newlines kept, as models write line by line); code
fences go through Pygments with inline styles, because QTextDocument ignores
<style> classes. Each code block gets a "Copy" link whose
href carries the block's index, and the code itself is returned alongside so
the view can put exact text on the clipboard (not text scraped from HTML).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound


@dataclass
class Theme:
    dark: bool = False
    code_bg: str = "#f4f4f4"
    muted: str = "#777777"
    link: str = "#2a6fdb"

    @property
    def pygments_style(self) -> str:
        return "monokai" if self.dark else "friendly"


@dataclass
class Rendered:
    html: str
    code_blocks: list[str] = field(default_factory=list)


def markdown_parser() -> MarkdownIt:
    """The one parser configuration: the live view splits a streaming reply with
    the same parse that renders it, so its blocks are the renderer's blocks."""
    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")


class MarkdownRenderer:
    def __init__(self, theme: Theme | None = None):
        self.theme = theme or Theme()
        self.md = markdown_parser()
        self._formatters: dict[str, HtmlFormatter] = {}

    def _formatter(self) -> HtmlFormatter:
        style = self.theme.pygments_style
        if style not in self._formatters:
            self._formatters[style] = HtmlFormatter(style=style, noclasses=True, nowrap=True)
        return self._formatters[style]

    def render(self, text: str, copy_base: int = 0) -> Rendered:
        """Render `text`; copy links are numbered from `copy_base` on."""
        codes: list[str] = []
        md = self.md
        rules = md.renderer.rules  # type: ignore[attr-defined]  # markdown-it's RendererHTML has them

        def fence(tokens, idx, _options, _env):
            tok = tokens[idx]
            lang = (tok.info or "").strip().split(" ")[0]
            codes.append(tok.content)
            return self._code_html(tok.content, lang, copy_base + len(codes) - 1)

        def code_block(tokens, idx, _options, _env):
            codes.append(tokens[idx].content)
            return self._code_html(tokens[idx].content, "", copy_base + len(codes) - 1)

        rules["fence"], rules["code_block"] = fence, code_block
        # QTextDocument draws no table borders unless asked in attributes.
        rules["table_open"] = lambda *_a: '<table border="1" cellspacing="0" cellpadding="4">'
        body = md.render(text)
        return Rendered(body, codes)

    def _code_html(self, code: str, lang: str, n: int) -> str:
        try:
            lexer = get_lexer_by_name(lang) if lang else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        hl = highlight(code, lexer, self._formatter()).rstrip("\n")
        return self._code_box(hl, lang, n)

    def open_code_html(self, lang: str, placeholder: str) -> str:
        """The box of a code block still streaming, the same as a finished one's so it
        does not move when it closes; its text goes in where `placeholder` stands, and
        it has no Copy link yet (its code is not whole)."""
        return self._code_box(html.escape(placeholder), lang, None)

    def _code_box(self, code_html: str, lang: str, n: int | None) -> str:
        t = self.theme
        label = html.escape(lang) if lang else "code"
        copy = "Copy" if n is None else f'<a href="copy:{n}" style="color:{t.link};">Copy</a>'
        return (
            f'<p style="margin-top:6px; margin-bottom:0px; color:{t.muted}; font-size:small;">'
            f'{label} &nbsp;{copy}</p>'
            f'<table width="100%" cellpadding="8" cellspacing="0" bgcolor="{t.code_bg}" '
            f'style="margin-bottom:6px;"><tr><td>'
            f'<pre style="margin:0px; font-family:monospace;">{code_html}</pre></td></tr></table>'
        )
