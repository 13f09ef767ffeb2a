"""How a message looks in the transcript: its frame, header, body and footer, and their insets.

Apart from the view, which decides where in the document a message goes and
when it is drawn, so the look is written once for both ways a message is
drawn: a finished message fills a frame of frame_format with message_html,
and the live reply, which streams into plain blocks of the root frame (see
view.py), copies that frame's padding as its blocks' margins (inset,
tail_format), so the finished frame draws its blocks where the live ones were.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtGui import (
    QColor,
    QPalette,
    QTextBlockFormat,
    QTextCursor,
    QTextDocument,
    QTextFrameFormat,
    QTextLength,
)

from app.chat.conversation import LiveMessage
from app.engine.stats import ReplyStats
from app.history.records import JSON_REPLY
from app.rendering.markdown_html import json_markdown
from app.rendering.tool_parts import message_markdown
from app.ui.chat.markdown import Theme

ROLE_LABEL = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool result"}
FRAME_PADDING = 8  # a message frame's padding, which the live reply's blocks copy as margins
PARAGRAPH_MARGIN = 12  # QTextDocument's margin above a <p>


def theme_from(pal: QPalette) -> Theme:
    """The transcript's colours from the palette. A dark palette's link may be Qt's default dark
    blue (a desktop's dark theme that sets no link colour): it is lightened until it reads on
    the code box's dark grey, where the Copy link sits."""
    base = pal.color(QPalette.ColorRole.Base)
    dark = base.lightness() < 128
    code = base.lighter(135) if dark else base.darker(106)
    muted = pal.color(QPalette.ColorRole.PlaceholderText)
    link = readable(pal.color(QPalette.ColorRole.Link), code) if dark else pal.color(QPalette.ColorRole.Link)
    return Theme(dark=dark, code_bg=code.name(), muted=muted.name(), link=link.name())


def _luminance(c: QColor) -> float:
    ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
          for v in (c.redF(), c.greenF(), c.blueF())]
    return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]


def readable(color: QColor, bg: QColor, ratio: float = 4.5) -> QColor:
    """`color`, lightened in its own hue until it has WCAG's `ratio` of contrast on a dark `bg`."""
    out = QColor(color)
    while (_luminance(out) + 0.05) / (_luminance(bg) + 0.05) < ratio and out.lightness() < 245:
        out = QColor.fromHsl(max(out.hslHue(), 0), out.hslSaturation(), min(out.lightness() + 10, 245))
    return out


def frame_format(pal: QPalette, theme: Theme, role: str, out_of_context: bool) -> QTextFrameFormat:
    fmt = QTextFrameFormat()
    fmt.setPadding(FRAME_PADDING)
    fmt.setBottomMargin(6)
    fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
    if role == "user":
        fmt.setBackground(pal.color(QPalette.ColorRole.AlternateBase))
    if role == "tool":  # a result stands apart from what the model wrote: its own boxed block
        fmt.setBorder(1)
        fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        fmt.setBorderBrush(pal.color(QPalette.ColorRole.Mid))
        fmt.setBackground(QColor(theme.code_bg))
    if out_of_context:
        fmt.setBorder(1)
        fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Dashed)
        fmt.setBorderBrush(QColor(theme.muted))
    return fmt


def header_html(theme: Theme, role: str, out_of_context: bool, extra: str = "") -> str:
    tag = ""
    if out_of_context:
        tag = (f' &nbsp;<span style="color:{theme.muted}; font-weight:normal;">'
               "· out of context (not sent to the model)</span>")
    return f'<p style="margin:0px;"><b>{ROLE_LABEL.get(role, role)}</b>{tag}{extra}</p>'


def message_html(theme: Theme, msg: LiveMessage, render: Callable[[str], str],
                 render_typed: Callable[[str], str], thinking: str = "") -> str:
    """A finished message; `render` turns the assistant's Markdown into HTML, `render_typed` a
    person's text as typed with its code blocks boxed (both the view's, which keeps the code
    blocks for their Copy links). A reply held to JSON is drawn as its highlighted JSON code
    block, pretty-printed, as the exports draw it; a tool call as the tool's name over its
    arguments, highlighted the same way, and a tool's result as a block naming the tool.
    `thinking`: the reply's reasoning block (app.ui.chat.thinking), between header and answer."""
    text = json_markdown(msg.content) if msg.format == JSON_REPLY and msg.content else msg.content
    text = message_markdown(msg, text)
    body = (render if msg.role in ("assistant", "tool") else render_typed)(text) or "<p></p>"
    foot = ""
    if msg.stats is not None:
        made = f" · {msg.stats.made_with}" if msg.version() and msg.stats.made_with else ""
        foot = (f'<p style="margin-top:4px; color:{theme.muted}; font-size:small;">'
                f"{html.escape(footer(msg.stats) + made)}</p>")
    cut = ""
    if msg.state != "complete":  # a crash or a switch cut it off: say the text is partial
        cut = (f' &nbsp;<span style="color:#c0392b; font-weight:normal;">'
               f"· {html.escape(msg.state)} (partial reply)</span>")
    if msg.tool_calls:
        n = len(msg.tool_calls)
        cut += (f' &nbsp;<span style="color:{theme.muted}; font-weight:normal;">'
                f"· calls {'a tool' if n == 1 else f'{n} tools'}</span>")
    return (header_html(theme, msg.role, msg.out_of_context, cut + branch_html(theme, msg)) + thinking
            + body + foot)


MESSAGE_SCHEME = "msg"  # the view's links on a message: msg:ACTION/ID


PREV, NEXT = "\u2039", "\u203a"  # the switcher's single angle quotes


def _arrow(theme: Theme, mark: str, target: int | None, title: str) -> str:
    if target is None:  # the first or the last version: the mark stays, as a place, not a link
        return f'<span style="color:{theme.muted};">{mark}</span>'
    return (f'<a href="{MESSAGE_SCHEME}:show/{target}" title="{title}" '
            f'style="color:{theme.muted}; text-decoration:none;">{mark}</a>')


def branch_html(theme: Theme, msg: LiveMessage) -> str:
    """A saved message's place among its versions ("< 2 / 3 >", each arrow showing the version
    it points at) and what can be done from it: edit it (a new version beside it: a question is
    asked again, a reply kept as rewritten, marked edited), fork the path up to it into a new
    conversation, delete it and what follows it."""
    if msg.id is None or msg.role not in ("user", "assistant"):
        return ""
    parts = []
    version = msg.version()
    if version is not None:
        i, n = version
        prev = msg.alternatives[i - 2] if i > 1 else None
        nxt = msg.alternatives[i] if i < n else None
        parts.append(f"{_arrow(theme, PREV, prev, 'the version before')} {i} / {n} "
                     f"{_arrow(theme, NEXT, nxt, 'the version after')}")
    actions = [("edit", "Edit"), ("fork", "Fork"), ("delete", "Delete")]
    parts += [f'<a href="{MESSAGE_SCHEME}:{a}/{msg.id}" style="color:{theme.muted}; '
              f'text-decoration:none;">{label}</a>' for a, label in actions]
    edited = " · edited" if msg.edited else ""
    return (f' &nbsp;<span style="color:{theme.muted}; font-weight:normal; font-size:small;">'
            f"{edited} · {' · '.join(parts)}</span>")


def footer(st: ReplyStats) -> str:
    """The line under a reply: the CLI's summary, and the error when there was one."""
    return st.summary() + (f" · error: {st.error}" if st.error else "")


def typed_paragraph(text: str) -> str:
    """Text a person typed, every space and line as typed."""
    return f'<p style="white-space:pre-wrap;">{html.escape(text.strip(chr(10)))}</p>'


def inset(fmt, top: float | None = None):
    """A block's or a table's format with a message frame's side insets added."""
    fmt.setLeftMargin(fmt.leftMargin() + FRAME_PADDING)
    fmt.setRightMargin(fmt.rightMargin() + FRAME_PADDING)
    if top is not None:
        fmt.setTopMargin(top)
    return fmt


def inset_root(doc: QTextDocument) -> None:
    """Inset every top-level block and frame of `doc`, as if they stood in a message frame."""
    root = doc.rootFrame()
    for frame in root.childFrames():
        frame.setFrameFormat(inset(frame.frameFormat()))
    block = doc.begin()
    while block.isValid():
        cur = QTextCursor(block)
        if cur.currentFrame() is root:
            cur.setBlockFormat(inset(block.blockFormat()))
        block = block.next()


def tail_format(first: bool) -> QTextBlockFormat:
    """The live reply's open block's lines: a paragraph's top margin on the first, so the
    text does not move when it is rendered as one."""
    return inset(QTextBlockFormat(), top=PARAGRAPH_MARGIN if first else 0)
