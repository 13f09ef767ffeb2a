"""The transcript: one QTextBrowser, one QTextFrame per message.

A single document keeps text selectable across messages. Finished messages
are rendered from Markdown once. The message being streamed is plain text
appended at the end of its frame with a QTextCursor, so one paint costs the
same at token 10 and token 1,000 (re-setting the HTML of a growing reply is
what makes other chat apps freeze on long answers); it is rendered as
Markdown once, when it ends.
"""

from __future__ import annotations

import html
import time

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QGuiApplication,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFrame,
    QTextFrameFormat,
    QTextLength,
)
from PySide6.QtWidgets import QTextBrowser

from app.chat.conversation import ChatMessage
from app.ui.markdown_render import MarkdownRenderer, Theme

ROLE_LABEL = {"user": "You", "assistant": "Assistant", "system": "System"}
FOLLOW_SLACK_PX = 12  # this close to the bottom counts as "at the bottom"


def theme_from(pal: QPalette) -> Theme:
    base = pal.color(QPalette.ColorRole.Base)
    dark = base.lightness() < 128
    code = base.lighter(135) if dark else base.darker(106)
    muted = pal.color(QPalette.ColorRole.PlaceholderText)
    return Theme(dark=dark, code_bg=code.name(), muted=muted.name(),
                 link=pal.color(QPalette.ColorRole.Link).name())


class ChatView(QTextBrowser):
    copied = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.document().setDocumentMargin(10)
        self.renderer = MarkdownRenderer(theme_from(self.palette()))
        self._frames: list[QTextFrame] = []
        self._codes: dict[int, str] = {}
        self._live = False
        self._live_start = 0  # document position where the live reply's header starts
        self._live_body = 0  # ... and where its text starts
        self._live_has_text = False
        self.follow = True  # auto-scroll; off while the user reads further up
        self.stream_paints = 0  # incremental paints of the live reply (tests, bench)
        self.final_paints = 0  # whole-reply renders (one per reply)
        # (kind, perf_counter at end, ms) per text append and per viewport paint, when benchmarking
        self.paint_log: list[tuple[str, float, float]] | None = None
        sb = self.verticalScrollBar()
        sb.valueChanged.connect(self._on_scrolled)
        sb.rangeChanged.connect(self._on_range)

    # -- scrolling ----------------------------------------------------------
    def _on_scrolled(self, value: int) -> None:
        self.follow = value >= self.verticalScrollBar().maximum() - FOLLOW_SLACK_PX

    def _on_range(self, _lo: int, hi: int) -> None:
        if self.follow:
            self.verticalScrollBar().setValue(hi)

    def scroll_to_end(self) -> None:
        self.follow = True
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    # -- rendering ----------------------------------------------------------
    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange:
            self.renderer.theme = theme_from(self.palette())

    def _frame_format(self, role: str, out_of_context: bool) -> QTextFrameFormat:
        pal = self.palette()
        fmt = QTextFrameFormat()
        fmt.setPadding(8)
        fmt.setBottomMargin(6)
        fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
        if role == "user":
            fmt.setBackground(pal.color(QPalette.ColorRole.AlternateBase))
        if out_of_context:
            fmt.setBorder(1)
            fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Dashed)
            fmt.setBorderBrush(QColor(self.renderer.theme.muted))
        return fmt

    def _header_html(self, role: str, out_of_context: bool, extra: str = "") -> str:
        t = self.renderer.theme
        tag = ""
        if out_of_context:
            tag = (f' &nbsp;<span style="color:{t.muted}; font-weight:normal;">'
                   "· out of context (not sent to the model)</span>")
        return f'<p style="margin:0px;"><b>{ROLE_LABEL.get(role, role)}</b>{tag}{extra}</p>'

    def _message_html(self, msg: ChatMessage) -> str:
        t = self.renderer.theme
        if msg.role == "assistant":
            r = self.renderer.render(msg.content, copy_base=len(self._codes))
            for code in r.code_blocks:
                self._codes[len(self._codes)] = code
            body = r.html or "<p></p>"
        else:  # the user's text is shown as typed, not interpreted
            body = "<p>" + html.escape(msg.content).replace("\n", "<br>") + "</p>"
        foot = ""
        if msg.stats is not None:
            st = msg.stats
            err = f" · error: {html.escape(st.error)}" if st.error else ""
            foot = (f'<p style="margin-top:4px; color:{t.muted}; font-size:small;">'
                    f"{html.escape(st.summary())}{err}</p>")
        cut = ""
        if msg.state != "complete":  # a crash or a switch cut it off: say the text is partial
            cut = (f' &nbsp;<span style="color:#c0392b; font-weight:normal;">'
                   f"· {html.escape(msg.state)} (partial reply)</span>")
        return self._header_html(msg.role, msg.out_of_context, cut) + body + foot

    def _new_frame(self, fmt: QTextFrameFormat) -> tuple[QTextFrame, QTextCursor]:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        frame = cur.insertFrame(fmt)
        return frame, cur

    def _fill(self, frame: QTextFrame, markup: str) -> None:
        cur = frame.firstCursorPosition()
        cur.setPosition(frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cur.insertHtml(markup)

    def clear_messages(self) -> None:
        self.discard_live()
        self.document().clear()
        self._frames.clear()
        self._codes.clear()
        self.follow = True

    def add_message(self, msg: ChatMessage) -> None:
        frame, _ = self._new_frame(self._frame_format(msg.role, msg.out_of_context))
        self._fill(frame, self._message_html(msg))
        self._frames.append(frame)

    def update_message(self, index: int, msg: ChatMessage) -> None:
        """Re-render a finished message; the live reply after it keeps its place.

        The live reply is found by document positions, and every finished
        message stands before it, so a re-render that changes the message's
        length moves those positions by exactly that much.
        """
        before = self.document().characterCount()
        frame = self._frames[index]
        frame.setFrameFormat(self._frame_format(msg.role, msg.out_of_context))
        self._fill(frame, self._message_html(msg))
        if self._live:
            moved = self.document().characterCount() - before
            self._live_start += moved
            self._live_body += moved

    def show_conversation(self, messages: list[ChatMessage]) -> None:
        self.clear_messages()
        for m in messages:
            self.add_message(m)
        self.scroll_to_end()

    def truncate(self, n: int) -> None:
        """Drop the views of messages n.. (regenerate, edit and resend)."""
        self.discard_live()
        if n >= len(self._frames):
            return
        if n == 0:
            self.clear_messages()
            return
        cur = QTextCursor(self.document())
        cur.setPosition(self._frames[n - 1].lastPosition() + 1)
        cur.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        del self._frames[n:]

    # -- the live reply -----------------------------------------------------
    # The reply being streamed lives in plain blocks of the root frame, not in
    # a frame of its own: QTextDocumentLayout finds the visible blocks of the
    # root frame by binary search but walks a nested frame block by block, so
    # streaming into a frame made every paint cost grow with the reply.
    def _end(self) -> QTextCursor:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        return cur

    def begin_live(self, status: str) -> None:
        self.discard_live()
        self.stream_paints = self.final_paints = 0
        cur = self._end()
        self._live_start = cur.position()
        # Same insets as a finished message's frame (padding 8), so nothing jumps at the end.
        head = QTextBlockFormat()
        head.setLeftMargin(8)
        head.setTopMargin(24)
        head.setBottomMargin(8)
        bold = QTextCharFormat()
        bold.setFontWeight(700)
        cur.setBlockFormat(head)
        cur.insertText(ROLE_LABEL["assistant"], bold)
        body = QTextBlockFormat()
        body.setLeftMargin(8)
        body.setRightMargin(8)
        cur.insertBlock(body, QTextCharFormat())
        self._live, self._live_body, self._live_has_text = True, cur.position(), False
        self.live_status(status)
        self.scroll_to_end()

    def live_status(self, text: str) -> None:
        """Show the waiting line (elapsed time) until the reply's text starts."""
        if not self._live or self._live_has_text:
            return
        cur = self._end()
        cur.setPosition(self._live_body, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(self.renderer.theme.muted))
        cur.insertText(text, fmt)

    def live_append(self, text: str) -> None:
        """Append streamed text at the end of the document: cost ~ len(text)."""
        if not self._live or not text:
            return
        t0 = time.perf_counter()
        cur = self._end()
        if not self._live_has_text:
            self._live_has_text = True
            cur.setPosition(self._live_body, QTextCursor.MoveMode.KeepAnchor)
        cur.insertText(text, QTextCharFormat())
        self.stream_paints += 1
        if self.paint_log is not None:
            t1 = time.perf_counter()
            self.paint_log.append(("append", t1, (t1 - t0) * 1000))

    def end_live(self, msg: ChatMessage) -> None:
        """Render the finished reply once, as Markdown with its stats footer."""
        self.discard_live()
        self.add_message(msg)
        self.final_paints += 1

    def discard_live(self) -> None:
        if not self._live:
            return
        cur = self._end()
        cur.setPosition(self._live_start, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        cur.setBlockFormat(QTextBlockFormat())
        self._live = False

    def paintEvent(self, ev) -> None:
        if self.paint_log is None:
            super().paintEvent(ev)
            return
        t0 = time.perf_counter()
        super().paintEvent(ev)
        t1 = time.perf_counter()
        self.paint_log.append(("paint", t1, (t1 - t0) * 1000))

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == "copy":
            code = self._codes.get(int(url.path() or -1))
            if code is not None:
                QGuiApplication.clipboard().setText(code)
                self.copied.emit(code)
        elif url.scheme() in ("http", "https"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)

