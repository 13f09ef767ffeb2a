"""A thinking model's reply, split locally into its reasoning and its answer.

Three parts, each its own module: which format a template speaks
(reasoning_formats), the streaming split of text (reasoning_split), and the
thinking budget the Sampler consults token by token (reasoning_budget). This
module puts them on one reply: ReasoningReply sits between the decoder and
whoever listens, turns the decoder's TextDelta stream into ReasoningDelta and
TextDelta events, and fills the stats record's reasoning figures.

The markers of some formats are control tokens (gpt-oss's `<|end|>`,
Gemma 4's `<|channel>`, Ministral's `[THINK]`), which the decoder's text
leaves out as it leaves out every control token. The tracker notes where the
sampler drew one, and their text is put back into the stream at that place
before it is split, so every format is split from the same text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from app.engine.control import EventSink
from app.engine.events import Event, Finished, FirstToken, ReasoningDelta, TextDelta
from app.engine.reasoning_budget import COUNTING, IDLE, UNLIMITED, Piece, ReasoningBudget
from app.engine.reasoning_formats import OPEN, ReasoningFormat, TemplateThinking
from app.engine.reasoning_split import ReasoningSplitter

# Forced before the end marker when the budget is spent, so the answer reads as following a
# decision rather than a thought cut mid-sentence (llama-server's --reasoning-budget-message).
BUDGET_MESSAGE = "\n\nI have thought enough; time to answer.\n"


class ReasoningTracker:
    """What the Sampler tells about each token drawn: the budget's state machine (None: no
    budget), and where the format's control-token markers were drawn (`spliced`)."""

    def __init__(self, budget: ReasoningBudget | None, hidden: dict[int, str]):
        self.budget = budget
        self.hidden = hidden
        self.n = 0  # tokens accepted: a TextDelta's `generated` counts the same way
        self.spliced: list[tuple[int, str]] = []  # (index of the token, its text)

    @property
    def forcing(self) -> bool:
        b = self.budget
        return b is not None and b.forcing

    def forced(self) -> int:
        assert self.budget is not None
        return self.budget.forced()

    def accept(self, tok: int) -> None:
        text = self.hidden.get(tok)
        if text is not None:
            self.spliced.append((self.n, text))
        self.n += 1
        if self.budget is not None:
            self.budget.accept(tok)


def hidden_markers(fmt: ReasoningFormat, tokenize: Callable[[str], list[int]], piece: Piece,
                   plain: Piece) -> dict[int, str]:
    """The format's marker tokens that the decoder's text leaves out, with their text."""
    out = {}
    for marker in (fmt.start, fmt.end, fmt.header, fmt.header_end):
        for tok in tokenize(marker) if marker else ():
            special = piece(tok)
            if special and not plain(tok):
                out[tok] = special.decode("utf-8", "replace")
    return out


class ReasoningReply:
    """One reply of a thinking template: how to render its prompt, its tracker for the Sampler,
    and the event sink that splits its text."""

    def __init__(self, thinking: TemplateThinking, think, budget: int | None, constrained: bool,
                 tokenize: Callable[[str], list[int]], piece: Piece, plain: Piece):
        """`constrained`: the reply must match a format (JSON, a tool call); left to the template's
        default, a template with a switch then does not think, so the format starts at once."""
        fmt = thinking.format
        self.format = fmt
        if think is None and constrained and thinking.switch:
            think = False
        self.kwargs = thinking.kwargs(think)
        self.state = thinking.state(self.kwargs)
        opened = self.state == OPEN
        rb = None
        if budget is not None:
            forced = tokenize(BUDGET_MESSAGE + fmt.end)
            rb = ReasoningBudget(piece, [fmt.start.encode()], [fmt.end.encode()], forced,
                                 budget if budget >= 0 else UNLIMITED, COUNTING if opened else IDLE)
        self.tracker = ReasoningTracker(rb, hidden_markers(fmt, tokenize, piece, plain))
        self.splitter = ReasoningSplitter(fmt, opened)
        self._sink: EventSink | None = None
        self._next_splice = 0
        self._ttft: float | None = None
        self._t_submit: float | None = None
        self._first_t: float | None = None  # first text of either kind
        self._reason_t: float | None = None  # first reasoning text
        self._answer_t: float | None = None
        self._closed: tuple[int, float] | None = None  # (generated, t) when the reasoning ended
        self._last: tuple[int, float] = (0, 0.0)

    def sink(self, outer: EventSink | None) -> EventSink:
        """The sink the decoder emits to: every event reaches `outer` (when there is one), with
        TextDelta split and Finished carrying the answer alone."""
        self._sink = outer
        return self._event

    @property
    def reasoning(self) -> str:
        return self.splitter.reasoning

    @property
    def answer(self) -> str:
        return self.splitter.answer

    def _emit(self, ev: Event) -> None:
        if self._sink is not None:
            self._sink(ev)

    def _event(self, ev: Event) -> None:
        if isinstance(ev, FirstToken):
            self._ttft = ev.ttft_s  # re-sent at the first text shown after the split
        elif isinstance(ev, TextDelta):
            if self._t_submit is None and self._ttft is not None:
                self._t_submit = ev.t - self._ttft  # the FirstToken's delta, sent at the same instant
            self._splice(ev.generated, ev.t)
            self._feed(ev.text, ev.generated, ev.t, ev.logprobs)
        elif isinstance(ev, Finished):
            self._emit(self._finish(ev))
        else:
            self._emit(ev)

    def _splice(self, upto: int, t: float) -> None:
        """Put back the marker tokens drawn before the token that ends at `upto`."""
        sp = self.tracker.spliced
        while self._next_splice < len(sp) and sp[self._next_splice][0] < upto:
            at, text = sp[self._next_splice]
            self._next_splice += 1
            self._feed(text, at + 1, t, ())

    def _feed(self, text: str, generated: int, t: float, logprobs: tuple) -> None:
        was_closed = self.splitter.closed
        r, a = self.splitter.feed(text)
        self._show(r, a, generated, t, logprobs)
        if self.splitter.closed and not was_closed:
            self._closed = (generated, t)

    def _show(self, r: str, a: str, generated: int, t: float, logprobs: tuple) -> None:
        self._last = (generated, t)
        if (r or a) and self._first_t is None:
            self._first_t = t
            if self._t_submit is not None:
                self._emit(FirstToken(t - self._t_submit))
        if r:
            self._reason_t = self._reason_t or t
            self._emit(ReasoningDelta(r, generated, t))
        if a:
            self._answer_t = self._answer_t or t
            self._emit(TextDelta(a, generated, t, logprobs))

    def _finish(self, done: Finished) -> Finished:
        now = time.perf_counter()
        n = done.stats.decode_tokens or 0
        self._splice(n + 1, now)
        r, a = self.splitter.finish()
        self._show(r, a, n, now, ())
        self.fill(done)
        return replace(done, text=self.answer)

    def fill(self, done: Finished) -> None:
        """The stats record's reasoning figures (all None for a reply that did not reason)."""
        st = done.stats
        t0 = self._t_submit
        if t0 is not None:
            st.ttft_s = self._first_t - t0 if self._first_t is not None else None
        st.ttfa_s = self._answer_t - t0 if t0 is not None and self._answer_t is not None else None
        if not self.reasoning:
            return
        end_n, end_t = self._closed or (done.stats.decode_tokens or self._last[0], self._last[1])
        st.reasoning_tokens = end_n
        st.reasoning_s = end_t - self._reason_t if self._reason_t is not None else None
