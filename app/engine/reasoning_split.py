"""A thinking model's streamed reply, split into its reasoning and its answer as it arrives.

The decoder streams text in pieces that need not end on a marker's edge:
`</th` may come in one piece and `ink>` in the next. Text that might be the
start of the marker awaited next is held back until the following piece
settles it, so the two streams concatenate to exactly what `finish()` leaves.
Whitespace at either edge of the reasoning and at the answer's start is the
format's, not the model's words, and is dropped.

A reply that never closes its reasoning (cut by max tokens, or a model that
rambles on) keeps all of it as reasoning: an answer is only what follows the
closing marker.
"""

from __future__ import annotations

from app.engine.reasoning_formats import ReasoningFormat

START, REASONING, GAP, ANSWER = "start", "reasoning", "gap", "answer"


def _held(text: str, marker: str) -> int:
    """Length of the longest tail of `text` that begins `marker` (and may complete it later)."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class ReasoningSplitter:
    """Text pieces in, (reasoning_delta, answer_delta) out."""

    def __init__(self, fmt: ReasoningFormat, opened: bool = False):
        """`opened`: the generation prompt opened the reasoning, so the reply starts inside it
        and never shows the opening marker (a model that writes it anyway has it dropped)."""
        self.format = fmt
        self.phase = REASONING if opened else START
        self.had_reasoning = opened
        self._fresh = True  # nothing of the current phase's text shown yet
        self._buf = ""
        self.reasoning = ""
        self.answer = ""

    @property
    def closed(self) -> bool:
        """Whether the reasoning has ended (the answer, or harmony's header before it, follows)."""
        return self.had_reasoning and self.phase in (GAP, ANSWER)

    def feed(self, text: str) -> tuple[str, str]:
        self._buf += text
        r: list[str] = []
        a: list[str] = []
        while self._step(r, a):
            pass
        return self._out(r, a)

    def finish(self) -> tuple[str, str]:
        """The held-back tail: a partial marker that never completed is the phase's own text."""
        r: list[str] = []
        a: list[str] = []
        buf, self._buf = self._buf, ""
        if self.phase == START:
            self.phase, self._fresh = ANSWER, True
            buf = buf.lstrip()
        if self.phase == REASONING:
            r.append(self._shown(buf.rstrip()))
        elif self.phase == ANSWER:  # (a harmony header that never named its channel is dropped)
            a.append(self._shown(buf.rstrip()))
        return self._out(r, a)

    def _out(self, r: list[str], a: list[str]) -> tuple[str, str]:
        rd, ad = "".join(r), "".join(a)
        self.reasoning += rd
        self.answer += ad
        return rd, ad

    def _shown(self, s: str) -> str:
        if self._fresh:
            s = s.lstrip()
            self._fresh = not s
        return s

    def _enter(self, phase: str) -> None:
        self.phase, self._fresh = phase, True
        self.had_reasoning = self.had_reasoning or phase == REASONING

    def _past_header(self, text: str) -> bool:
        """A channel header (harmony's `<|start|>assistant<|channel|>final<|message|>`) is neither
        reasoning nor answer: the answer starts after its end, once that has arrived."""
        j = text.find(self.format.header_end)
        if j < 0:
            return False
        self._buf = text[j + len(self.format.header_end):]
        self._enter(ANSWER)
        return True

    def _step(self, r: list[str], a: list[str]) -> bool:
        """Advance over the buffer; True when the phase changed and the rest needs another look."""
        f, buf = self.format, self._buf
        if self.phase == START:
            lead = buf.lstrip()
            if lead.startswith(f.start):
                self._buf = lead[len(f.start):]
                self._enter(REASONING)
                return True
            if f.header and lead.startswith(f.header):  # another channel: its header is dropped
                return self._past_header(lead)
            if not lead or f.start.startswith(lead) or f.header.startswith(lead):
                return False
            self._enter(ANSWER)
            return True
        if self.phase == REASONING:
            if self._fresh and buf.lstrip().startswith(f.start):  # the prompt opened it already
                self._buf = buf.lstrip()[len(f.start):]
                return True
            if self._fresh and f.start.startswith(buf.lstrip()) and buf.strip():
                return False
            i = buf.find(f.end)
            if i >= 0:
                r.append(self._shown(buf[:i].rstrip()))
                self._buf = buf[i + len(f.end):]
                self._enter(GAP if f.header_end else ANSWER)
                return True
            keep = _held(buf, f.end)
            body = buf[:len(buf) - keep]
            shown = body.rstrip()  # trailing whitespace waits: it may precede the end marker
            r.append(self._shown(shown))
            self._buf = body[len(shown):] + buf[len(buf) - keep:]
            return False
        if self.phase == GAP:
            return self._past_header(buf)
        shown = buf.rstrip()
        a.append(self._shown(shown))
        self._buf = buf[len(shown):]
        return False
