"""LiveBlocks, the splitter behind live Markdown: which part of a streaming reply is finished.

No Qt here: the split is plain text against markdown-it's own parse, checked on
hand-picked shapes and, with hypothesis, on any text cut into any deltas.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ui.chat.live_markdown import LiveBlocks, visible, visible_end
from app.ui.chat.markdown import markdown_parser

MD = markdown_parser()


def stream(text: str, step: int = 1) -> tuple[LiveBlocks, list[str]]:
    blocks, chunks = LiveBlocks(MD), []
    for i in range(0, len(text), step):
        done = blocks.feed(text[i:i + step])
        if done:
            chunks.append(done)
    return blocks, chunks


@pytest.mark.parametrize("step", [1, 3, 1000])
@pytest.mark.parametrize(("text", "chunks", "tail"), [
    ("one\ntwo\n\nthree\n", ["one\ntwo\n\n"], "three\n"),
    ("# Title\nbody\n", ["# Title\n"], "body\n"),
    ("```py\nx = 1\n```\n", ["```py\nx = 1\n```\n"], ""),  # closed: finished with nothing after it
    ("text\n\n```py\nx = 1\n", ["text\n\n"], "```py\nx = 1\n"),
    ("```\nx\n```", [], "```\nx\n```"),  # the closing line is not whole yet
    ("````\n```\nx\n", [], "````\n```\nx\n"),  # a shorter fence does not close a longer one
    ("~~~\nx\n~~~\nafter", ["~~~\nx\n~~~\n"], "after"),
    # a list stays one block across blank lines, until a block of another kind starts
    ("- a\n\n- b\n\n- c\n", [], "- a\n\n- b\n\n- c\n"),
    ("- a\n\n- b\n\nafter\n", ["- a\n\n- b\n\n"], "after\n"),
    # a table stays open for more rows, until a blank line and the next block
    ("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", [], "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n"),
    ("| a | b |\n|---|---|\n| 1 | 2 |\n\nnext\n", ["| a | b |\n|---|---|\n| 1 | 2 |\n\n"], "next\n"),
    # a paragraph line turns into a table header only when the delimiter row comes
    ("intro\n| a | b |\n", [], "intro\n| a | b |\n"),
    ("intro\n| a | b |\n|---|---|\n", ["intro\n"], "| a | b |\n|---|---|\n"),
    ("Title\n===\n", [], "Title\n===\n"),  # a setext heading: the paragraph was never finished
    ("para\n-", [], "para\n-"),  # a partial line could still be a setext underline
    ("para\n- item\n", ["para\n"], "- item\n"),
    ("one\r\n\r\ntwo\r\n", ["one\r\n\r\n"], "two\r\n"),
    ("one\r\rtwo\rmore", ["one\r\r"], "two\rmore"),
    ("one\r\rtwo\r", [], "one\r\rtwo\r"),  # a last "\r" may be half of "\r\n": its line is not whole
])
def test_finished_blocks_are_committed_and_the_open_one_is_not(text, chunks, tail, step):
    blocks, got = stream(text, step)
    assert "".join(got) == "".join(chunks)
    if step == 1:
        assert got == chunks
    assert blocks.tail == tail and blocks.committed + blocks.tail == text


def test_an_ordered_list_split_by_a_code_block_keeps_its_numbering():
    text = "1. a\n\n```\nc\n```\n2. b\n\ntext\n"
    blocks, chunks = stream(text)
    assert chunks == ["1. a\n\n", "```\nc\n```\n", "2. b\n\n"]
    assert '<ol start="2">' in MD.render(chunks[2])
    assert "".join(MD.render(c) for c in chunks) + MD.render(blocks.tail) == MD.render(text)


def test_an_open_fence_reports_its_language_and_code_so_far():
    blocks, _ = stream("Intro\n\n```python\ndef f():\n    return 1\n")
    fence = blocks.open_fence
    assert fence is not None and fence.lang == "python"
    assert blocks.tail[fence.start:] == "def f():\n    return 1\n"
    blocks.feed("```")
    assert blocks.open_fence is not None  # the closing fence is not whole until its newline
    assert blocks.feed("\n") == "```python\ndef f():\n    return 1\n```\n"
    assert blocks.open_fence is None and blocks.tail == ""


def test_a_reply_that_ends_mid_fence_leaves_the_fence_open():
    blocks, chunks = stream("Run:\n\n```sh\nls -l\nrm -")
    assert chunks == ["Run:\n\n"]
    assert blocks.open_fence is not None and blocks.tail[blocks.open_fence.start:] == "ls -l\nrm -"


class CountingParser:
    """A markdown-it wrapper that notes the length of every text it parses."""

    def __init__(self):
        self.sizes: list[int] = []

    def parse(self, text):
        self.sizes.append(len(text))
        return MD.parse(text)


def test_parses_only_on_newlines_and_only_the_open_block():
    spy = CountingParser()
    blocks = LiveBlocks(spy)
    for word in ("lorem ipsum " * 50).split(" "):
        blocks.feed(word + " ")
    assert spy.sizes == [], "no newline, no parse"
    for i in range(200):
        blocks.feed(f"paragraph {i} with some words\n\n")
    assert len(spy.sizes) == 200
    assert max(spy.sizes) < 700, "the parse is the open block's, not the reply's"
    assert len(blocks.committed) > 5000


@pytest.mark.parametrize(("text", "shown"), [
    ("para\n\n", "para"),
    ("x = 1\n```", "x = 1"),
    ("para\n\n```py", "para"),
    ("a\n``b", "a\n``b"),
    ("a `b`", "a `b`"),
    ("", ""),
])
def test_visible_holds_back_what_would_flash(text, shown):
    assert visible(text) == shown and visible_end(text) == len(shown)


LINES = ["para", "more text here", "- item", "* star", "+ plus", "1. one", "2. two", "10) ten",
         "  - nested", "```", "```python", "~~~", "````", "   ```", "    indented", "", "", "",
         "> quote", "# head", "---", "===", "| a | b |", "|---|---|", "| 1 | 2 |", "a | b", "--|--",
         "`inline` code", "**bold** text", "\t", "x\r", "y\r\n", "é ünï 🐉"]


@st.composite
def split_text(draw):
    text = "\n".join(draw(st.lists(st.sampled_from(LINES), min_size=1, max_size=14)))
    text += draw(st.sampled_from(["", "\n", "\n\n", " tail"]))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=10)))
    return text, [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def top_level_spans(text: str) -> list[tuple[int, int]]:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n?|\n", text)] + [len(text)]
    return [(starts[t.map[0]], starts[t.map[1]]) for t in MD.parse(text)
            if t.level == 0 and t.map and t.nesting >= 0]


@settings(max_examples=400, deadline=None)
@given(split_text())
def test_any_text_in_any_deltas_splits_between_whole_blocks(case):
    text, deltas = case
    blocks, chunks, fed, before = LiveBlocks(MD), [], "", ""
    for d in deltas:
        fed += d
        done = blocks.feed(d)
        assert blocks.committed == before + done, "commits only grow"
        assert blocks.committed + blocks.tail == fed
        before = blocks.committed
        if done:
            chunks.append(done)
    spans = top_level_spans(text)
    end = 0
    for chunk in chunks:
        end += len(chunk)
        assert not any(a < end < b for a, b in spans), f"a commit cut a block at {end}"
    # whole blocks render alone as they do in the whole reply (no link reference
    # definitions in LINES: those act across blocks)
    assert "".join(MD.render(c) for c in chunks) + MD.render(blocks.tail) == MD.render(text)


@settings(max_examples=200, deadline=None)
@given(split_text())
def test_visible_holds_back_only_line_breaks_and_a_partial_fence_line(case):
    _text, deltas = case
    blocks = LiveBlocks(MD)
    for d in deltas:
        blocks.feed(d)
        shown = visible(blocks.tail)
        assert blocks.tail.startswith(shown)
        held = blocks.tail[len(shown):].lstrip("\r\n")
        assert not re.search(r"[\r\n]", held)
        assert held == "" or re.match(r" {0,3}[`~]", held)
