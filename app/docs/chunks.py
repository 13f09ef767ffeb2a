"""Passages cut along a document's own structure, each a span of its text.

A passage that stops mid-section or splits a code block answers worse and cites worse, so the
cuts fall at headings, pages and paragraph ends first, and a code block stays whole when it
fits. Each passage is a (start, end) span of the document's text, so the window can show it in
place and a source can be checked against the text it came from. Neighbouring passages of one
section overlap a little, so a sentence cut at the edge is still whole in one of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str
    where: str


def chunk(text: str, kind: str, page_starts: tuple[int, ...] = (), size: int = 1200,
          overlap: int = 150) -> list[Chunk]:
    if size < 100:
        raise ValueError(f"a passage of {size} characters is too small to answer anything")
    overlap = max(0, min(overlap, size // 3))
    out: list[Chunk] = []
    for start, end, where in _sections(text, kind, page_starts):
        units = _units(text, start, end, fenced=kind in ("markdown", "docx", "html"))
        out.extend(_pack(text, units, where, size, overlap))
    return out


def _sections(text: str, kind: str, page_starts: tuple[int, ...]) -> list[tuple[int, int, str]]:
    if kind == "pdf" and page_starts:
        ends = [*page_starts[1:], len(text)]
        return [(s, e, f"page {i + 1}") for i, (s, e) in enumerate(zip(page_starts, ends))]
    if kind in ("markdown", "docx", "html"):
        return _markdown_sections(text)
    if kind == "code":
        return [(0, len(text), "code")]
    return [(0, len(text), "")]


def _markdown_sections(text: str) -> list[tuple[int, int, str]]:
    """Spans between headings, each named by its heading path ("Install > Linux")."""
    marks: list[tuple[int, str]] = []
    stack: list[tuple[int, str]] = []
    in_fence, at = False, 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _HEADING.match(line.rstrip("\n"))):
            level, title = len(m.group(1)), _plain(m.group(2))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            marks.append((at, " > ".join(t for _, t in stack if t)))
        at += len(line)
    if not marks or marks[0][0] > 0:
        marks.insert(0, (0, ""))
    ends = [m[0] for m in marks[1:]] + [len(text)]
    return [(s, e, w) for (s, w), e in zip(marks, ends)]


def _plain(title: str) -> str:
    t = _LINK.sub(r"\1", title).replace("`", "").replace("*", "").replace("\\_", "_")
    return " ".join(t.split())[:120]


def _units(text: str, start: int, end: int, fenced: bool) -> list[tuple[int, int]]:
    """Paragraphs (blank-line separated) and, in Markdown, whole fenced code blocks."""
    units: list[tuple[int, int]] = []
    u_start, in_fence, at = None, False, start
    for line in text[start:end].splitlines(keepends=True):
        blank = not line.strip()
        if fenced and _FENCE.match(line):
            in_fence = not in_fence
        if u_start is None and not blank:
            u_start = at
        at += len(line)
        if blank and u_start is not None and not in_fence:
            units.append((u_start, at))
            u_start = None
    if u_start is not None:
        units.append((u_start, end))
    return units


def _pack(text: str, units: list[tuple[int, int]], where: str, size: int, overlap: int) -> list[Chunk]:
    out: list[Chunk] = []
    i, s = 0, None
    while i < len(units):
        if s is None:
            s = units[i][0]
        e = s
        while i < len(units) and units[i][1] - s <= size:
            e = units[i][1]
            i += 1
        if e == s:  # one unit alone is larger than a passage: cut it at a line or word end
            e = _soft_cut(text, s, min(units[i][1], s + size))
            if e >= units[i][1]:
                i += 1
        c = _span(text, s, e, where)
        if c:
            out.append(c)
        if i >= len(units):
            break
        s = _overlap_start(text, e, overlap, lower=s + 1) if overlap else max(units[i][0], e)
    return out


def _soft_cut(text: str, s: int, hard: int) -> int:
    if hard >= len(text):
        return len(text)
    half = s + (hard - s) // 2
    for sep in ("\n", " "):
        cut = text.rfind(sep, half, hard)
        if cut > s:
            return cut + 1
    return hard


def _overlap_start(text: str, e: int, overlap: int, lower: int) -> int:
    """Where the next passage begins: a little before `e`, at a word start."""
    b = max(lower, e - overlap)
    sp = text.find(" ", b, e)
    nl = text.find("\n", b, e)
    cands = [x + 1 for x in (sp, nl) if x != -1]
    return min(cands) if cands else b


def _span(text: str, s: int, e: int, where: str) -> Chunk | None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if s >= e or not _WORD.search(text, s, e):
        return None
    if where == "code":
        first = text.count("\n", 0, s) + 1
        where = f"lines {first}-{first + text.count(chr(10), s, e)}"
    return Chunk(start=s, end=e, text=text[s:e], where=where)
