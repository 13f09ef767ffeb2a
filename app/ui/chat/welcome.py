"""The chat area: the transcript, or, while the conversation is empty, a welcome with a way in.

A first launch used to open on an empty white box: nothing said what to type
or what the gauges beside it would show. The welcome names both and offers a
few example prompts the bundled model answers well; clicking one sends it.
It stands in the transcript's place whenever the conversation shown has no
message (a first run, New chat), and gives way as soon as the transcript's
document has text, so no caller has to say when: the view's own document
decides.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QStackedWidget, QTextBrowser

from app.ui.chat.view import ChatView

EXAMPLES = (
    "Name three colours and one thing of each colour.",
    "Write a haiku about the sea.",
    "How do I reverse a string in Python?",
    "Explain in two sentences why the sky is blue.",
)


def welcome_html(pal: QPalette) -> str:
    muted = pal.color(QPalette.ColorRole.PlaceholderText).name()
    link = pal.color(QPalette.ColorRole.Link)
    if pal.color(QPalette.ColorRole.Base).lightness() < 128 and link.lightness() < 150:
        link = link.lighter(170)
    items = "".join(f'<li style="margin-bottom:6px;"><a href="ask:{i}" style="color:{link.name()};">'
                    f"{html.escape(text)}</a></li>" for i, text in enumerate(EXAMPLES))
    return (
        '<h2 style="margin-bottom:4px;">Welcome to LlamaDesk</h2>'
        f'<p style="color:{muted};">A model runs here, on this machine: nothing you type leaves it.</p>'
        "<p>Type a message below and press <b>Enter</b> (Shift+Enter for a new line, Esc stops a "
        "reply). Or start with one of these:</p>"
        f"<ul>{items}</ul>"
        "<p>While the model answers, the panel on the right shows how long it took to start "
        "(<b>TTFT</b>), how fast it read your message (<b>Prefill</b>) and how fast it writes "
        "(<b>Decode</b>), how much of its memory the chat uses (<b>KV cache</b>), and a timeline "
        "of every reply.</p>"
        f'<p style="color:{muted};">Another model: <b>Open…</b> a GGUF file, or <b>Connect…</b> to a '
        "server. <b>Settings</b> has the sampling settings, explained, and Light or Dark.</p>"
    )


class Welcome(QTextBrowser):
    example_chosen = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.document().setDocumentMargin(24)
        self.anchorClicked.connect(self._on_anchor)
        self.refresh()

    def refresh(self) -> None:
        self.setHtml(welcome_html(self.palette()))

    def changeEvent(self, ev) -> None:
        super().changeEvent(ev)
        if ev.type() == ev.Type.PaletteChange:
            self.refresh()

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == "ask":
            self.example_chosen.emit(EXAMPLES[int(url.path())])


class ChatArea(QStackedWidget):
    """The transcript (`view`), or the welcome while it is empty."""

    def __init__(self, view: ChatView, parent=None):
        super().__init__(parent)
        self.view = view
        self.welcome = Welcome()
        self.addWidget(self.welcome)
        self.addWidget(view)
        view.document().contentsChanged.connect(self._follow)
        self._follow()

    def _follow(self) -> None:
        empty = self.view.document().isEmpty()
        self.setCurrentWidget(self.welcome if empty else self.view)
