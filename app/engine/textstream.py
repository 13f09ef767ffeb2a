"""Turns token bytes into visible text, safely for UTF-8 and stop strings.

A token may carry half of an emoji or CJK character; bytes are held until
they decode. Text that might be the start of a stop string ("\nUser:") is
held back until it is clear, and trailing whitespace is held until something
follows it, so the streamed deltas concatenate to exactly the final text.
"""

from __future__ import annotations

import codecs
import ctypes

import llama_cpp


class TextAssembler:
    def __init__(self, stop: tuple[str, ...] = (), strip_leading: bool = True, verbatim: bool = False):
        """`verbatim`: keep whitespace at both ends, as a raw completion returns it (a chat
        reply is trimmed: the model's newline before it and after it are not the reply)."""
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._verbatim = verbatim
        strip_leading = strip_leading and not verbatim
        self._stop = tuple(s for s in stop if s)
        self._maxstop = max((len(s) for s in self._stop), default=0)
        self._strip_leading = strip_leading
        self.text = ""  # everything decoded so far (after leading strip)
        self.emitted = 0
        self.stopped = False

    def feed(self, data: bytes) -> str:
        """Add one token's bytes; return the newly visible text (may be "")."""
        try:
            s = self._utf8.decode(data)
        except UnicodeDecodeError:
            # Invalid bytes from the model: show a replacement char, never drop.
            self._utf8.reset()
            s = data.decode("utf-8", "replace")
        return self._add(s)

    def _add(self, s: str) -> str:
        if not s or self.stopped:
            return ""
        if self._strip_leading and not self.text:
            s = s.lstrip()
            if not s:
                return ""
        start = max(0, len(self.text) - self._maxstop)
        self.text += s
        cut = self._find_stop(start)
        if cut is not None:
            self.text = self.text[:cut] if self._verbatim else self.text[:cut].rstrip()
            self.stopped = True
            return self._take(len(self.text))
        safe = len(self.text) - self._partial_stop_len()
        # Hold trailing whitespace: if the reply ends here it is stripped.
        while not self._verbatim and safe > self.emitted and self.text[safe - 1].isspace():
            safe -= 1
        return self._take(safe)

    def _find_stop(self, start: int) -> int | None:
        best = None
        for st in self._stop:
            i = self.text.find(st, start)
            if i != -1 and (best is None or i < best):
                best = i
        return best

    def _partial_stop_len(self) -> int:
        """Length of the longest tail of text that begins some stop string."""
        best = 0
        for st in self._stop:
            for n in range(min(len(st) - 1, len(self.text)), best, -1):
                if self.text.endswith(st[:n]):
                    best = n
                    break
        return best

    def _take(self, upto: int) -> str:
        if upto <= self.emitted:
            return ""
        out = self.text[self.emitted:upto]
        self.emitted = upto
        return out

    def finish(self) -> str:
        """Flush at end of stream; a dangling partial UTF-8 sequence becomes U+FFFD."""
        tail = self._utf8.decode(b"", final=False)
        try:
            tail += self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            tail += "\ufffd"
        out = self._add(tail) if tail else ""
        if not self.stopped and not self._verbatim:
            self.text = self.text.rstrip()
        # Held-back text that turned out not to be a stop string is now final.
        return out + self._take(len(self.text))


class TokenReader:
    """What one sampled token means for a reply: its text, and whether it ends it.

    The Decoder and every batch slot read tokens through this one class, so
    the rules (end-of-generation, stop strings, max tokens, what counts as
    generated) are the same step for step, and a greedy request gives the
    same text batched as alone.
    """

    def __init__(self, vocab, stop: tuple[str, ...], max_new: int, ignore_eos: bool = False,
                 strip_leading: bool = True, verbatim: bool = False):
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._to_piece = llama_cpp.llama_token_to_piece
        self._vocab = vocab
        self._piece = ctypes.create_string_buffer(256)
        self.asm = TextAssembler(stop, strip_leading=strip_leading, verbatim=verbatim)
        self.max_new = max_new
        self.ignore_eos = ignore_eos
        self.generated = 0
        self.tokens: list[int] = []
        self.stop_reason: str | None = None

    def accept(self, tok: int) -> str:
        """Take one sampled token; return its newly visible text. Sets stop_reason
        when the reply is over (an end-of-generation token is not counted)."""
        if not self.ignore_eos and self._is_eog(self._vocab, tok):
            self.stop_reason = "stop"
            return ""
        self.generated += 1
        self.tokens.append(tok)
        n = self._to_piece(self._vocab, tok, self._piece, 256, 0, False)
        delta = self.asm.feed(self._piece.raw[:n]) if n > 0 else ""
        if self.asm.stopped:
            self.stop_reason = "stop"
        elif self.generated >= self.max_new:
            self.stop_reason = "length"
        return delta

    def finish(self) -> str:
        return self.asm.finish()
