"""The transcript: one QTextBrowser, one QTextFrame per message.

A single document keeps text selectable across messages. Finished messages
are rendered from Markdown once. The message being streamed is rendered a
block at a time: a top-level Markdown block is rendered once, when it is
finished (app.ui.chat.live_markdown says when), and only the open block after it
is plain text appended with a QTextCursor (an open code block already in its
code box), so one paint costs the same at token 10 and token 1,000 (re-setting
the HTML of a growing reply is what makes other chat apps freeze on long
answers). When the reply ends it is rendered whole into its frame, which
draws its blocks where the live ones were drawn.

What a message looks like (its frame, header, footer, the insets the live
reply copies) is message_format's; this module places messages in the
document, streams the live one and follows the end while the user does not
scroll away.
"""

from __future__ import annotations

import html
import time

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFrame,
    QTextFrameFormat,
    QTextTable,
)

from app.chat.conversation import LiveMessage
from app.engine.message import Source
from app.rendering.markdown_html import typed_segments
from app.ui.chat.attachment_chips import describe
from app.ui.chat.file_drops import FileDropBrowser
from app.ui.chat.live_markdown import LINE_BREAK, LiveBlocks
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_format import (
    FRAME_PADDING,
    MESSAGE_SCHEME,
    ROLE_LABEL,
    frame_format,
    inset,
    inset_root,
    message_html,
    tail_format,
    theme_from,
    typed_paragraph,
)
from app.ui.chat.sources import SOURCE_SCHEME, sources_html
from app.ui.chat.thinking import THINK_ACTION, thinking_html

FOLLOW_SLACK_PX = 12  # this close to the bottom counts as "at the bottom"
CODE_PLACEHOLDER = "\u200b"  # stands in an open code box's cell until its text replaces it


class ChatView(FileDropBrowser):
    copied = Signal(str)
    message_action = Signal(str, int)  # "show", "edit", "fork" or "delete", and the message's id
    restyled = Signal()  # the palette changed: what is drawn holds the old colours
    source_clicked = Signal(object)  # a reply's numbered Source, to show in its document

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setAcceptDrops(True)
        self.anchorClicked.connect(self._on_anchor)
        self.document().setDocumentMargin(10)
        self.renderer = MarkdownRenderer(theme_from(self.palette()))
        self._frames: list[QTextFrame] = []
        self._messages: list[LiveMessage] = []  # what each frame shows, to draw it again
        self._thoughts_open: set[int] = set()  # ids of the messages whose reasoning is unfolded
        self._codes: dict[int, str] = {}  # copy link number -> the code it copies
        self._next_code = 0
        self._live = False
        self._live_start = 0  # document position where the live reply's header starts
        self._live_body = 0  # ... where its text starts
        self._live_tail = 0  # ... and where its open (not yet rendered) block starts
        self._live_has_text = False
        self._live_thinking = False  # the live reply's reasoning block is drawn above its text
        self._blocks = LiveBlocks(self.renderer.md)
        self._live_codes: list[int] = []  # copy links of the live reply's rendered blocks
        self._live_code: QTextTable | None = None  # the box of an open code block
        self._shown = 0  # the open block's text on screen ends here in LiveBlocks.tail
        self._scratch = QTextDocument(self)  # where a finished block is built before it goes in
        self.follow = True  # auto-scroll; off while the user reads further up
        self.stream_paints = 0  # incremental paints of the live reply (tests, bench)
        self.final_paints = 0  # whole-reply renders (one per reply)
        self.live_renders = 0  # times finished blocks were rendered while the reply streamed (tests, bench)
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
            new = theme_from(self.palette())
            if new != self.renderer.theme:
                self.renderer.theme = new
                self.restyled.emit()

    def _frame_format(self, msg: LiveMessage) -> QTextFrameFormat:
        return frame_format(self.palette(), self.renderer.theme, msg.role, msg.out_of_context)

    def _render(self, text: str, live: list[int] | None = None) -> str:
        """Markdown to HTML, its code blocks kept under fresh copy numbers (noted in
        `live` for a live reply's, which go when it does); numbers are never reused,
        so a link drawn earlier never copies another block."""
        r = self.renderer.render(text, copy_base=self._next_code)
        for code in r.code_blocks:
            self._codes[self._next_code] = code
            if live is not None:
                live.append(self._next_code)
            self._next_code += 1
        return r.html

    def _render_typed(self, text: str) -> str:
        """A person's message as typed; its fenced code blocks in code boxes with Copy links."""
        parts = []
        for seg in typed_segments(text, self.renderer.md):
            if seg.code:
                self._codes[self._next_code] = seg.text
                parts.append(self.renderer.typed_code_html(seg.text, seg.lang, self._next_code))
                self._next_code += 1
            else:
                parts.append(typed_paragraph(seg.text))
        return "".join(parts)

    def _new_frame(self, fmt: QTextFrameFormat) -> tuple[QTextFrame, QTextCursor]:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        frame = cur.insertFrame(fmt)
        return frame, cur

    def _message_html(self, index: int, msg: LiveMessage) -> str:
        opened = id(msg) in self._thoughts_open
        think = thinking_html(self.renderer.theme, msg, f"{MESSAGE_SCHEME}:{THINK_ACTION}/{index}", opened)
        out = message_html(self.renderer.theme, msg, self._render, self._render_typed, think)
        return out + self._documents_html(index, msg)

    def _documents_html(self, index: int, msg: LiveMessage) -> str:
        """A question's attachments named under it; a reply's numbered sources under it."""
        theme = self.renderer.theme
        if msg.attachments:
            names = "  ·  ".join(html.escape(describe(a)) for a in msg.attachments)
            return (f'<p style="margin-top:4px; margin-bottom:0px; color:{theme.muted}; font-size:small;">'
                    f"Attached: {names}</p>")
        if msg.docs is not None:
            return sources_html(theme, msg.docs, index)
        return ""

    def source_at(self, index: int, n: int) -> Source | None:
        """Source `n` of the reply drawn at `index`, or None."""
        if not 0 <= index < len(self._messages) or self._messages[index].docs is None:
            return None
        return next((s for s in self._messages[index].docs.sources if s.n == n), None)

    def toggle_thinking(self, index: int) -> None:
        """Open a message's folded reasoning, or fold it again."""
        if not 0 <= index < len(self._messages):
            return
        msg = self._messages[index]
        self._thoughts_open ^= {id(msg)}
        self.update_message(index, msg)

    def _fill(self, frame: QTextFrame, markup: str) -> None:
        cur = frame.firstCursorPosition()
        cur.setPosition(frame.lastPosition(), QTextCursor.MoveMode.KeepAnchor)
        cur.insertHtml(markup)

    def clear_messages(self) -> None:
        self.discard_live()
        self.document().clear()
        self._frames.clear()
        self._messages.clear()
        self._thoughts_open.clear()
        self._codes.clear()
        self._next_code = 0
        self.follow = True

    def add_message(self, msg: LiveMessage) -> None:
        frame, _ = self._new_frame(self._frame_format(msg))
        self._fill(frame, self._message_html(len(self._frames), msg))
        self._frames.append(frame)
        self._messages.append(msg)

    def update_message(self, index: int, msg: LiveMessage) -> None:
        """Re-render a finished message; the live reply after it keeps its place.

        The live reply is found by document positions, and every finished
        message stands before it, so a re-render that changes the message's
        length moves those positions by exactly that much.
        """
        before = self.document().characterCount()
        frame = self._frames[index]
        frame.setFrameFormat(self._frame_format(msg))
        self._messages[index] = msg
        self._fill(frame, self._message_html(index, msg))
        if self._live:
            moved = self.document().characterCount() - before
            self._live_start += moved
            self._live_body += moved
            self._live_tail += moved

    def show_conversation(self, messages: list[LiveMessage]) -> None:
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
        del self._messages[n:]

    # -- the live reply -----------------------------------------------------
    # The reply being streamed lives in plain blocks of the root frame, not in
    # a frame of its own: QTextDocumentLayout finds the visible blocks of the
    # root frame by binary search but walks a nested frame block by block, so
    # streaming into a frame made every paint cost grow with the reply.
    # Its finished Markdown blocks are rendered there once (LiveBlocks says
    # which); only the open block after them is rewritten as tokens come.
    def _end(self) -> QTextCursor:
        cur = QTextCursor(self.document())
        cur.movePosition(QTextCursor.MoveOperation.End)
        return cur

    def begin_live(self, status: str) -> None:
        self.discard_live()
        self.stream_paints = self.final_paints = self.live_renders = 0
        cur = self._end()
        # The empty block at the end stays, as it stays above a finished message's frame.
        self._live_start = cur.position()
        bold = QTextCharFormat()
        bold.setFontWeight(700)
        cur.insertBlock(inset(QTextBlockFormat(), top=FRAME_PADDING), bold)
        cur.insertText(ROLE_LABEL["assistant"], bold)
        cur.insertBlock(tail_format(first=True), QTextCharFormat())
        self._live, self._live_has_text = True, False
        self._live_body = self._live_tail = cur.position()
        self._blocks = LiveBlocks(self.renderer.md)
        self._live_code, self._shown = None, 0
        self.live_status(status)
        self.scroll_to_end()

    def live_status(self, text: str) -> None:
        """Show the waiting line (elapsed time) until the reply's text starts."""
        if not self._live or self._live_has_text or self._live_thinking:
            return
        cur = self._end()
        cur.setPosition(self._live_body, QTextCursor.MoveMode.KeepAnchor)
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(self.renderer.theme.muted))
        cur.insertText(text, fmt)

    def live_think(self, line: str, text: str) -> None:
        """Before the answer: the reasoning streams, dimmed, under `line` ('Thinking… 7.2 s'),
        which takes the waiting line's place; new text is appended, the line rewritten."""
        if not self._live or self._live_has_text:
            return
        cur, muted = self._think_line(line)
        if not self._live_thinking:
            self._live_thinking = True
            cur.insertBlock(tail_format(first=False), muted)
        if text:
            _insert_lines(self._end(), text, tail_format(first=False), muted)

    def _think_line(self, line: str) -> tuple[QTextCursor, QTextCharFormat]:
        """Write the live block's line (the waiting line's place); the cursor ends after it."""
        muted = QTextCharFormat()
        muted.setForeground(QColor(self.renderer.theme.muted))
        cur = QTextCursor(self.document())
        cur.setPosition(self._live_body)
        cur.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
        cur.insertText(line, muted)
        return cur, muted

    def fold_thinking(self, line: str) -> None:
        """The answer starts: the live reasoning folds to `line` ('Thought for 12.4 s'), and the
        answer's text begins in a block of its own under it."""
        if not self._live or not self._live_thinking or self._live_has_text:
            return
        cur, _muted = self._think_line(line)
        cur.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        cur.insertBlock(tail_format(first=True), QTextCharFormat())
        self._live_body = self._live_tail = cur.position()
        self._live_thinking = False
        self._live_has_text = True

    def live_append(self, text: str) -> None:
        """Take streamed text: cost ~ len(text), or the open block's size when a
        newline finishes a block (rendered then) or opens a code block."""
        if not self._live or not text:
            return
        t0 = time.perf_counter()
        done = self._blocks.feed(text)
        coding = self._blocks.open_fence is not None
        if done or not self._live_has_text or coding != (self._live_code is not None):
            self._rebuild_tail(done)
        else:
            self._extend_tail()
        self.stream_paints += 1
        if self.paint_log is not None:
            t1 = time.perf_counter()
            self.paint_log.append(("append", t1, (t1 - t0) * 1000))

    @property
    def in_open_code(self) -> bool:
        """A code block is streaming into its box (the screenshot script waits for one)."""
        return self._live_code is not None

    def _open_text(self) -> str:
        """The open block's text to show: after the opening fence for code."""
        fence = self._blocks.open_fence
        return self._blocks.tail[fence.start if fence else 0 : self._shown]

    def _tail_end(self) -> QTextCursor:
        if self._live_code is not None:
            return self._live_code.cellAt(0, 0).lastCursorPosition()
        return self._end()

    def _extend_tail(self) -> None:
        end = self._blocks.shown_end()
        if end < self._shown:  # what was shown ended in a line held back now
            self._rebuild_tail("")
            return
        cur = self._tail_end()
        if self._live_code is not None:
            line, chars = cur.blockFormat(), cur.charFormat()
        else:
            line, chars = tail_format(first=False), QTextCharFormat()
        _insert_lines(cur, self._blocks.tail[self._shown:end], line, chars)
        self._shown = end

    def _rebuild_tail(self, done: str) -> None:
        """Render the blocks just finished where the open block stood, then show
        what is open now after them (plain text, or a code box for a fence)."""
        self._live_has_text = True
        cur = self._end()
        cur.setPosition(self._live_tail, QTextCursor.MoveMode.KeepAnchor)
        cur.removeSelectedText()
        if done.strip():
            self._live_tail = self._insert_html(self._render(done, self._live_codes)) + 1
            self.live_renders += 1
        self._live_code, self._shown = None, self._blocks.shown_end()
        cur = self._end()
        fence = self._blocks.open_fence
        if fence is None:
            cur.setBlockFormat(tail_format(first=True))
            cur.setCharFormat(QTextCharFormat())
            _insert_lines(cur, self._open_text(), tail_format(first=False), QTextCharFormat())
            return
        cur.setPosition(self._insert_html(self.renderer.open_code_html(fence.lang, CODE_PLACEHOLDER)))
        cur.deleteChar()  # the box ends in its own empty block: the tail's is one too many
        cell = QTextCursor(self.document())
        cell.setPosition(self._live_tail)
        cell.movePosition(QTextCursor.MoveOperation.NextBlock)
        self._live_code = cell.currentTable()
        cell = self._live_code.cellAt(0, 0).firstCursorPosition()
        cell.movePosition(QTextCursor.MoveOperation.NextCharacter, QTextCursor.MoveMode.KeepAnchor)
        mono = cell.charFormat()
        cell.removeSelectedText()
        _insert_lines(cell, self._open_text(), cell.blockFormat(), mono)

    def _insert_html(self, markup: str) -> int:
        """Insert `markup` as blocks of their own between the rendered part and the
        open block, with a finished message's insets; return where it ends.

        The fragment is cut from a scratch document after a first block, so it
        starts with a block break and keeps every block's own format (inserted
        into an existing block, its first block would take that block's format),
        and a leading table follows the block before it as in a finished message.
        """
        doc = self._scratch
        doc.setDefaultFont(self.document().defaultFont())
        doc.setHtml("<p>-</p>" + markup.strip())
        inset_root(doc)
        part = QTextCursor(doc)
        part.setPosition(doc.begin().length() - 1)
        part.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cur = QTextCursor(self.document())
        cur.setPosition(self._live_tail - 1)
        cur.insertFragment(QTextDocumentFragment(part))
        return cur.position()

    def end_live(self, msg: LiveMessage) -> None:
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
        for n in self._live_codes:
            self._codes.pop(n, None)
        self._live_codes.clear()
        self._live_code = None
        self._live = False
        self._live_thinking = False

    def paintEvent(self, ev) -> None:
        if self.paint_log is None:
            super().paintEvent(ev)
            return
        t0 = time.perf_counter()
        super().paintEvent(ev)
        t1 = time.perf_counter()
        self.paint_log.append(("paint", t1, (t1 - t0) * 1000))

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == SOURCE_SCHEME:
            index, _, n = url.path().partition("/")
            src = self.source_at(int(index), int(n)) if index.isdigit() and n.isdigit() else None
            if src is not None:
                self.source_clicked.emit(src)
        elif url.scheme() == MESSAGE_SCHEME:
            action, _, mid = url.path().partition("/")
            if mid.isdigit() and action == THINK_ACTION:
                self.toggle_thinking(int(mid))
            elif mid.isdigit():
                self.message_action.emit(action, int(mid))
        elif url.scheme() == "copy":
            code = self._codes.get(int(url.path() or -1))
            if code is not None:
                QGuiApplication.clipboard().setText(code)
                self.copied.emit(code)
        elif url.scheme() in ("http", "https"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)


def _insert_lines(cur: QTextCursor, text: str, line: QTextBlockFormat, chars: QTextCharFormat) -> None:
    """Insert `text` with each line break a new block of format `line` (insertText
    would copy the current block's format, a first line's top margin included)."""
    for i, piece in enumerate(LINE_BREAK.split(text)):
        if i:
            cur.insertBlock(line, chars)
        if piece:
            cur.insertText(piece, chars)
