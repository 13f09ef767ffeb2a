"""Markdown to HTML, once for the window and the HTML export: markdown-it's parse, Pygments' colours.

Below both the window (app.ui) and the exports (app.history.export), which may not
import Qt or app.ui: one parser configuration and one code highlighter, so a
reply exported reads as the window drew it. What differs
is only the HTML around a code block and a table (QTextDocument understands a
small subset, a browser all of CSS), which each renderer's `code_box` and
`table_open` say.

markdown-it-py parses CommonMark plus tables, with no raw HTML (model output
is untrusted text: a `<script>` in a reply is escaped like any other text) and
single newlines kept, as models write line by line.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

LIGHT_STYLE, DARK_STYLE = "friendly", "monokai"


def markdown_parser() -> MarkdownIt:
    """The one parser configuration: the live view splits a streaming reply with
    the same parse that renders it, so its blocks are the renderer's blocks."""
    return MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")


def lexer_for(lang: str) -> Lexer:
    """The fence's language, or plain text for none or one Pygments does not know."""
    try:
        return get_lexer_by_name(lang) if lang else TextLexer()
    except ClassNotFound:
        return TextLexer()


def fence_lang(info: str) -> str:
    return (info or "").strip().split(" ")[0]


def json_markdown(text: str) -> str:
    """A reply held to JSON as the Markdown of one JSON code block, which every renderer then
    highlights: pretty-printed when it parses, as it came when it does not (max tokens can cut
    it short, and a cut reply is still what the model wrote). The fence is longer than any run
    of backticks inside, so a string holding one cannot close it."""
    try:
        shown = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):
        shown = text.strip("\n")
    return code_markdown(shown, "json")


def code_markdown(text: str, lang: str = "") -> str:
    """`text` as one fenced code block whose fence no run of backticks inside can close."""
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{fence}{lang}\n{text}\n{fence}\n"


@dataclass
class Rendered:
    html: str
    code_blocks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Segment:
    """A part of a message a person typed: plain text, or a fenced code block (`lang`)."""

    text: str
    code: bool = False
    lang: str = ""


def typed_segments(text: str, md: MarkdownIt | None = None) -> list[Segment]:
    """A user's message as typed, with its fenced code blocks found by the renderer's own
    parse: the text around them is shown as typed (no Markdown: a '*' or '#' a person
    types is meant as that character), the code in a code box with its indentation."""
    md = md or markdown_parser()
    lines = text.splitlines(keepends=True)
    out: list[Segment] = []
    at = 0
    for tok in md.parse(text):
        if tok.type != "fence" or tok.level != 0 or tok.map is None:
            continue
        first, end = tok.map
        if first > at:
            out.append(Segment("".join(lines[at:first])))
        out.append(Segment(tok.content, True, fence_lang(tok.info)))
        at = end
    if at < len(lines):
        out.append(Segment("".join(lines[at:])))
    return [s for s in out if s.code or s.text.strip("\n")]


class HtmlRenderer:
    """Markdown to HTML with highlighted code; `style` is the Pygments style, `inline`
    whether colours go in style attributes (QTextDocument ignores <style> classes)."""

    table_open = "<table>"

    def __init__(self, style: str = LIGHT_STYLE, inline: bool = True) -> None:
        self.style, self.inline = style, inline
        self.md = markdown_parser()
        self._formatters: dict[str, HtmlFormatter] = {}

    def formatter(self) -> HtmlFormatter:
        if self.style not in self._formatters:
            self._formatters[self.style] = HtmlFormatter(style=self.style, noclasses=self.inline,
                                                         nowrap=True)
        return self._formatters[self.style]

    def highlight(self, code: str, lang: str) -> str:
        return str(highlight(code, lexer_for(lang), self.formatter())).rstrip("\n")

    def render(self, text: str, copy_base: int = 0) -> Rendered:
        """Render `text`; its code blocks are numbered from `copy_base` on (the window's Copy links)."""
        codes: list[str] = []
        md = self.md
        rules = md.renderer.rules  # type: ignore[attr-defined]  # markdown-it's RendererHTML has them

        def code(content: str, lang: str) -> str:
            codes.append(content)
            return self.code_box(self.highlight(content, lang), lang, copy_base + len(codes) - 1)

        rules["fence"] = lambda tokens, idx, _o, _e: code(tokens[idx].content, fence_lang(tokens[idx].info))
        rules["code_block"] = lambda tokens, idx, _o, _e: code(tokens[idx].content, "")
        rules["table_open"] = lambda *_a: self.table_open
        return Rendered(md.render(text), codes)

    def code_box(self, code_html: str, lang: str, n: int | None) -> str:
        """A browser's code box: the language above, the code in a <pre> that scrolls sideways."""
        label = html.escape(lang) if lang else "code"
        return (f'<figure class="code"><figcaption>{label}</figcaption>'
                f'<pre class="hl">{code_html}</pre></figure>\n')


def page_css() -> str:
    """Pygments' colours for the export's code, light and under `prefers-color-scheme: dark`."""
    light = HtmlFormatter(style=LIGHT_STYLE).get_style_defs(".hl")
    dark = HtmlFormatter(style=DARK_STYLE).get_style_defs(".hl")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"
