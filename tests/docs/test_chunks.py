"""Passages follow the document's structure and are true spans of its text."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from app.docs.chunks import chunk
from app.docs.extract import extract
from tests.docs import files


def _spans_hold(text, parts):
    assert parts
    for c in parts:
        assert text[c.start:c.end] == c.text and c.text.strip() == c.text


def test_markdown_sections_are_named_by_their_heading_path():
    parts = chunk(files.MARKDOWN, "markdown")
    _spans_hold(files.MARKDOWN, parts)
    by_where = {c.where: c.text for c in parts}
    assert "make install" in by_where["Install > Linux"] and "licence" in by_where["Install > Windows"]
    assert "Read this first" in by_where["Install"]


def test_a_code_block_that_fits_stays_whole():
    block = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(60)) + "\n```\n"  # ~560 characters
    text = "# Code\n\n" + "Some words here. " * 40 + "\n\n" + block + "\n" + "More words. " * 40 + "\n"
    parts = chunk(text, "markdown", size=800, overlap=100)
    _spans_hold(text, parts)
    assert any(block.strip() in c.text for c in parts)


def test_pdf_passages_say_their_page(tmp_path):
    ex = extract(files.pdf(tmp_path / "p.pdf"))
    parts = chunk(ex.text, ex.kind, ex.page_starts)
    _spans_hold(ex.text, parts)
    assert [c.where for c in parts] == ["page 1", "page 2", "page 3"]
    assert "Vlieland" in parts[1].text


def test_long_text_is_cut_near_size_with_overlap_and_no_gaps():
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    text = "\n\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 120))) for _ in range(80))
    parts = chunk(text, "text", size=1200, overlap=150)
    _spans_hold(text, parts)
    assert all(len(c.text) <= 1200 for c in parts)
    for a, b in itertools.pairwise(parts):
        assert b.start > a.start and b.start <= a.end + 2  # each passage starts before the last one ends
    assert parts[0].start == 0 and parts[-1].end == len(text.rstrip())


def test_code_passages_name_their_lines():
    text = "\n\n".join(f"def f{i}():\n" + "    pass\n" * 30 for i in range(20))
    parts = chunk(text, "code", size=600)
    _spans_hold(text, parts)
    first = parts[1]
    line = text.count("\n", 0, first.start) + 1
    assert first.where.startswith(f"lines {line}-")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab #\n`~-é"), max_size=3000),
       st.sampled_from(["markdown", "text", "code", "html"]), st.integers(100, 900))
def test_any_text_gives_true_spans(text, kind, size):
    for c in chunk(text, kind, size=size, overlap=size // 5):
        assert text[c.start:c.end] == c.text and c.text
        assert len(c.text) <= size
