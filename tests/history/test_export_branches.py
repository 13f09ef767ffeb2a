"""Markdown, HTML and text exports of a conversation with branches, read back by real parsers.

By default they write the path shown, a message with alternatives marked "version 2 of 3"; with
all_branches every message of the tree once, the path shown first, then each other branch as a
section from where it leaves the ones before, naming that message by an id written earlier in the
file. Real SQLite in the test's XDG data dir.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from app.history import export, transcript
from app.history.store import Store
from tests.transcripts import branched


@pytest.fixture
def conv():
    with Store.open() as s:
        return s.get_conversation(branched(s))


def headings(md: str) -> list[tuple[str, str]]:
    tokens = MarkdownIt("commonmark").parse(md)
    return [(t.tag, tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"]


def paragraphs(md: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parse(md)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "paragraph_open"]


def test_markdown_writes_the_path_shown_with_its_versions_marked(conv):
    md = export.render(conv, "md")
    heads = headings(md)
    assert heads[0] == ("h1", "question 1")
    assert [h for tag, h in heads[1:]] == [
        "User", "Assistant", "User (version 1 of 2)", "Assistant", "User", "Assistant", "User", "Assistant",
        "User", "Assistant (version 2 of 3)"]
    texts = paragraphs(md)
    assert "answer 5, again 1" in texts and "answer 5" not in texts and "question 2, edited" not in texts
    assert "10 messages shown (14 on 4 branches)" in md


def test_markdown_with_all_branches_has_every_message_once_in_sections_that_name_where_they_start(conv):
    md = export.render(conv, "md", all_branches=True)
    heads = headings(md)
    sections = [h for tag, h in heads if tag == "h2"]
    assert sections == ["Branch 1 of 4: the path shown",
                        "Branch 2 of 4: after message 9 (User: “question 5”)",
                        "Branch 3 of 4: after message 9 (User: “question 5”)",
                        "Branch 4 of 4: after message 2 (Assistant: “answer 1”)"]
    texts = paragraphs(md)
    for m in conv.tree:
        assert texts.count(m.content) == 1, m.content
    messages = [h for tag, h in heads if tag == "h3"]
    assert len(messages) == 14
    # Each section starts after a message the file has already shown, by the id its heading gave.
    seen: set[int] = set()
    for tag, h in heads[1:]:
        if tag == "h3":
            seen.add(int(re.search(r"message (\d+)", h).group(1)))
        elif (after := re.search(r"after message (\d+)", h)) is not None:
            assert int(after.group(1)) in seen, h
    assert "Assistant (message 14, version 3 of 3)" in messages
    assert "User (message 11, version 2 of 2)" in messages
    assert "14 messages on 4 branches" in md


def test_a_conversation_without_branches_reads_the_same_either_way():
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "hi")
        s.add_message(cid, "assistant", "hello")
        conv = s.get_conversation(cid)
    for fmt in ("md", "html", "txt"):
        assert export.render(conv, fmt, all_branches=True) == export.render(conv, fmt)
    assert "version" not in export.render(conv, "md")


class Sections(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.branches: list[str] = []
        self.contents: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class", "")
        if tag == "h2" and cls == "branch":
            self._in = "branch"
            self.branches.append("")
        elif tag == "div" and cls == "content":
            self._in = "content"
            self.contents.append("")

    def handle_endtag(self, tag):
        if tag in ("h2", "div"):
            self._in = None

    def handle_data(self, data):
        if self._in == "branch":
            self.branches[-1] += data
        elif self._in == "content":
            self.contents[-1] += data


def test_html_with_all_branches_has_a_section_per_branch_and_every_message_once(conv):
    page = Sections()
    page.feed(export.render(conv, "html", all_branches=True))
    assert len(page.branches) == 4 and page.branches[0] == "Branch 1 of 4: the path shown"
    assert sorted(c.strip() for c in page.contents) == sorted(m.content for m in conv.tree)
    shown = Sections()
    shown.feed(export.render(conv, "html"))
    assert shown.branches == [] and [c.strip() for c in shown.contents] == [m.content for m in conv.messages]
    assert "version 2 of 3" in export.render(conv, "html")


def test_text_with_all_branches_underlines_each_section(conv):
    txt = export.render(conv, "txt", all_branches=True)
    lines = txt.splitlines()
    for n in range(1, 5):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"Branch {n} of 4"))
        assert lines[at + 1] == "-" * len(lines[at])
    for m in conv.tree:
        assert lines[3:].count(m.content) == 1  # under the title, which is the first question
    assert "Assistant (version 2 of 3):" in export.render(conv, "txt")


def test_json_always_writes_the_whole_tree(conv):
    assert export.render(conv, "json", all_branches=True).count('"parent_id"') == 14
    assert export.render(conv, "json").count('"parent_id"') == 14


def test_a_version_1_file_exports_with_all_branches_as_its_line(tmp_path):
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "hi")
        s.add_message(cid, "assistant", "hello")
        doc = transcript.to_document(s.get_conversation(cid))
    doc["version"] = 1
    conv = transcript.from_document(doc)
    assert conv.tree == []
    assert export.render(conv, "md", all_branches=True) == export.render(conv, "md")
