"""A thinking model's reasoning in the transcript: a block that streams under its own clock while
the model thinks, folds to one line when the answer starts, and opens again on a click.

Apart from the view so the block's look is written once for a finished message (thinking_html)
and for the live reply (LiveThinking keeps what the flow has painted of it), and the view only
places it. Folded by default: the answer is what a reader came for, and a long reasoning would
push it off the screen; the one line still says that there was thinking, how long and how much.
"""

from __future__ import annotations

import html

from app.chat.conversation import LiveMessage
from app.ui.chat.markdown import Theme

THINK_ACTION = "think"  # the view's link on a message's block: msg:think/FRAME_INDEX
CLOSED, OPENED = "\u25b8", "\u25be"  # the block's triangle: folded, open


def thinking_html(theme: Theme, msg: LiveMessage, link: str, opened: bool) -> str:
    """The block of a finished message: its one line ("Thought for 12.4 s · 431 tokens"), a link
    that opens or folds it, and when open the reasoning as it was written, dimmed and indented."""
    if not msg.reasoning:
        return ""
    said = (msg.stats.thought() if msg.stats is not None else None) or "Thought"
    head = (f'<p style="margin:2px 0px;"><a href="{link}" style="color:{theme.muted}; '
            f'text-decoration:none;">{OPENED if opened else CLOSED} {html.escape(said)}</a></p>')
    if not opened:
        return head
    body = html.escape(msg.reasoning.strip("\n"))
    return head + (f'<p style="margin:0px 0px 6px 14px; color:{theme.muted}; white-space:pre-wrap;">'
                   f"{body}</p>")


class LiveThinking:
    """The reasoning of the reply being generated, as the flow receives and paints it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.painted = 0  # of `parts`, how many the view shows
        self.t_first: float | None = None  # perf_counter of the first reasoning text
        self.t_answer: float | None = None  # ... and of the first answer text after it
        self.tokens = 0  # tokens generated when the last reasoning text came
        self.folded = False  # the view has folded the block (the answer is streaming)
        self.line = ""  # the clock's line the view shows, rewritten only when it changes

    def feed_reasoning(self, text: str, t: float, generated: int) -> None:
        if self.t_first is None:
            self.t_first = t
        self.parts.append(text)
        self.tokens = generated

    def feed_answer(self, t: float) -> None:
        """The answer's first text ends the thinking (a reply with none never starts it)."""
        if self.t_first is not None and self.t_answer is None:
            self.t_answer = t

    @property
    def started(self) -> bool:
        return self.t_first is not None

    def text(self) -> str:
        return "".join(self.parts)

    def unpainted(self) -> str:
        new = "".join(self.parts[self.painted:])
        self.painted = len(self.parts)
        return new

    def clock(self, now: float) -> str:
        """The live block's line while the model thinks: 'Thinking… 7.2 s'."""
        return f"{OPENED} Thinking\u2026 {now - (self.t_first or now):.1f} s"

    def folded_line(self) -> str:
        """The line the block folds to when the answer starts, before the reply's own record
        (which replaces it when the reply ends) is there: the time and the tokens seen live."""
        took = (self.t_answer or 0.0) - (self.t_first or 0.0)
        tokens = f" · {self.tokens} tokens" if self.tokens else ""
        return f"{CLOSED} Thought for {took:.1f} s{tokens}"
