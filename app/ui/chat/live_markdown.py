"""Which part of a streaming Markdown reply can already be rendered for good.

The view renders a finished top-level block once and keeps only the open tail
as plain text, so the cost of a token stays bounded by the open block, never
by the reply. What counts as a block, and where it ends, is markdown-it's own
answer (the line maps of its level-0 tokens), so the live split cannot drift
from the renderer's parse: a block is finished once a later top-level block has
started after it, and a fenced code block once its closing fence has arrived.
Only whole lines are parsed (a partial line can still turn into a fence or a
setext underline), and only the text after what was committed, so the work per
newline is the size of the open block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

LINE_BREAK = re.compile(r"\r\n?|\n")  # markdown-it's own line breaks (its normalize rule)
# A last, partial line that may still become a fence line: shown once it cannot.
_MAYBE_FENCE = re.compile(r" {0,3}(?:`{1,2}|~{1,2}|`{3,}[^`\r\n]*|~{3,}[^\r\n]*)")
# Nothing continues a closed fence, so a paragraph line after it starts a new block;
# inside an unclosed fence the same line is only more code.
_PROBE = "x\n"


@dataclass(frozen=True)
class OpenFence:
    """The open tail is a fenced code block still being written."""

    lang: str
    start: int  # where its code (the lines after the opening fence) starts in the tail


class LiveBlocks:
    """Feed the reply delta by delta; take the newly finished blocks each time.

    Invariant: `committed + tail` is the text fed so far, and `committed` ends
    where a top-level block of the whole reply starts.
    """

    def __init__(self, md: MarkdownIt):
        self._md = md
        self._done: list[str] = []  # the committed chunks
        self.tail = ""
        self.open_fence: OpenFence | None = None

    @property
    def committed(self) -> str:
        return "".join(self._done)

    def feed(self, delta: str) -> str:
        """Take `delta`; return the text of the blocks it finished ("" when none)."""
        held_cr = self.tail.endswith("\r")  # its line ends now, whatever comes
        self.tail += delta
        if "\n" not in delta and "\r" not in delta and not held_cr:
            return ""
        pending = self.tail
        cut, self.open_fence = self._split(pending[: _whole_lines(pending)])
        if cut:
            self._done.append(pending[:cut])
            self.tail = pending[cut:]
        return pending[:cut]

    def shown_end(self) -> int:
        """Where in the tail the text to show ends (see visible), found from its
        end, so a token costs the same however long the open block is."""
        return max(visible_end(self.tail), self.open_fence.start if self.open_fence else 0)

    def _split(self, lines: str) -> tuple[int, OpenFence | None]:
        """(how much of `lines` is finished, the open fence of what is left)."""
        blocks = self._top_blocks(lines)
        if not blocks:
            return 0, None
        starts = [0] + [m.end() for m in LINE_BREAK.finditer(lines)]
        last = blocks[-1]
        first_line, end_line = last.map
        if last.type != "fence":
            return starts[first_line], None
        if self._closed(lines[starts[first_line] : starts[end_line]]):
            return starts[end_line], None
        lang = (last.info or "").strip().split(" ")[0]
        return starts[first_line], OpenFence(lang, starts[first_line + 1] - starts[first_line])

    def _closed(self, fence: str) -> bool:
        return len(self._top_blocks(fence + _PROBE)) > 1

    def _top_blocks(self, text: str) -> list:
        """The tokens that open a top-level block (closing tokens carry no line map)."""
        return [t for t in self._md.parse(text) if t.level == 0 and t.map and t.nesting >= 0]


def visible(text: str) -> str:
    """What of the open tail to show now: without its trailing line breaks and a
    partial fence line, which would show for a frame and vanish when the block is
    rendered (an empty line under a paragraph, a closing fence in a code box)."""
    return text[: visible_end(text)]


def visible_end(text: str) -> int:
    nl = text.rfind("\n")
    last = max(nl, text.rfind("\r", nl + 1)) + 1  # where the last line starts
    end = last if _MAYBE_FENCE.fullmatch(text, last) else len(text)
    while end and text[end - 1] in "\r\n":
        end -= 1
    return end


def _whole_lines(text: str) -> int:
    """Length of the complete lines at the start of `text`; a final "\\r" may
    still be half of a "\\r\\n", so it does not end a line yet."""
    end = 0
    for m in LINE_BREAK.finditer(text):
        if m.group() == "\r" and m.end() == len(text):
            break
        end = m.end()
    return end
