"""Every export format, read back by a real parser; escaping; atomic writes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from markdown_it import MarkdownIt

from app.engine.stats import ReplyStats
from app.history import export, messages, transcript
from app.history.errors import ExportError
from app.history.records import INTERRUPTED
from app.history.store import Store

XSS = [
    "<script>alert('pwned')</script>",
    '<img src=x onerror="alert(1)">',
    "a & b < c > d \" ' </div></section><script>x()</script>",
]


def stats(**kw) -> ReplyStats:
    base = dict(ttft_s=0.25, prefill_tokens=31, cached_tokens=12, prefill_s=0.03, prefill_tok_s=1033.3,
                decode_tokens=17, decode_s=0.17, decode_tok_s=100.0, total_s=0.45, kv_used=60, n_ctx=2048,
                stop_reason="stop", prompt_tokens=43, wall_decode_tok_s=96.1)
    return ReplyStats(**{**base, **kw})


@pytest.fixture
def conv():
    """A conversation with the awkward cases: unicode, markup, an interrupted reply, a dropped turn."""
    with Store.open() as s:
        cid = s.create_conversation(system_prompt="You are <b>terse</b>.", model="gemma.gguf",
                                    settings={"temperature": 0.0, "max_tokens": 64})
        s.add_message(cid, "user", "Héllo 🦙 — 中文?", out_of_context=True)
        s.add_message(cid, "assistant", "Hi! Line one\nline two", stats=stats(), out_of_context=True)
        s.add_message(cid, "user", XSS[0])
        s.add_message(cid, "assistant", XSS[1], stats=stats(stop_reason="length", ttft_s=None))
        s.add_message(cid, "user", XSS[2])
        r = s.begin_reply(cid)
        s.finish_reply(r, "cut off mid", None, state=INTERRUPTED)
        return s.get_conversation(cid)


# --- JSON ------------------------------------------------------------------

def test_json_is_complete_and_valid(conv, tmp_path):
    path = export.export(conv, tmp_path / "t.json")
    doc = json.loads(path.read_text("utf-8"))
    # No message has reasoning: the version 2 document it always was.
    assert doc["format"] == "llamadesk.transcript" and doc["version"] == transcript.PLAIN_VERSION
    c = doc["conversation"]
    assert (c["title"], c["system_prompt"], c["model"], c["settings"]) == \
           (conv.title, conv.system_prompt, conv.model, conv.settings)
    assert [m["content"] for m in c["messages"]] == [m.content for m in conv.messages]
    assert [m["out_of_context"] for m in c["messages"]] == [True, True, False, False, False, False]
    assert c["messages"][1]["stats"] == stats().to_json()
    assert c["messages"][3]["stats"]["ttft_s"] is None
    assert c["messages"][5]["state"] == "interrupted" and c["messages"][5]["stats"] is None


# --- HTML ------------------------------------------------------------------

class Collector(HTMLParser):
    """Records every tag and attribute, and the text of each message's content div."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.contents: list[str] = []
        self.summaries: list[str] = []
        self._in = None
        self.title = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        cls = dict(attrs).get("class", "")
        if tag == "div" and cls == "content":
            self._in = "content"
            self.contents.append("")
        elif tag == "summary":
            self._in = "summary"
            self.summaries.append("")
        elif tag == "title":
            self._in = "title"

    def handle_endtag(self, tag):
        if tag in ("div", "summary", "title"):
            self._in = None

    def handle_data(self, data):
        if self._in == "content":
            self.contents[-1] += data
        elif self._in == "summary":
            self.summaries[-1] += data
        elif self._in == "title":
            self.title += data


def test_html_parses_back_to_the_messages_with_stats(conv, tmp_path):
    page = export.export(conv, tmp_path / "t.html").read_text("utf-8")
    p = Collector()
    p.feed(page)
    p.close()
    # Rendered, these plain messages read as their text (a paragraph ends in a newline).
    assert [c.strip() for c in p.contents] == [m.content for m in conv.messages]
    assert p.summaries == [stats().summary(), stats(stop_reason="length", ttft_s=None).summary()]
    assert p.title == conv.title
    assert page.count("interrupted") >= 1 and page.count("out of context") == 2


def test_html_renders_markup_in_messages_as_text(conv, tmp_path):
    page = export.export(conv, tmp_path / "t.html").read_text("utf-8")
    p = Collector()
    p.feed(page)
    p.close()
    assert "script" not in p.tags and "img" not in p.tags and "b" not in p.tags
    assert not [a for a, _ in p.attrs if a.startswith("on")]
    assert "<script>" not in page and "<img" not in page
    for evil in XSS:
        assert evil in [c.strip() for c in p.contents]  # shown as the very characters the model wrote
    assert "default-src 'none'" in page  # and scripts are forbidden even if escaping ever failed
    assert "http://" not in page and "https://" not in page  # self-contained


def test_html_renders_markdown_as_the_window_does_and_figures_as_the_footer(tmp_path):
    reply = ("Use this:\n\n```python\ndef f(x):\n    return x\n```\n\n"
             "| a | b |\n|---|---|\n| 1 | 2 |\n")
    typed = "Why?\n\n```\nif x:\n    y()\n```"
    st = stats(ttft_s=1.267739806999998, prefill_tokens=8, prefill_s=0.0213, error=None, source=None)
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", typed)
        s.add_message(cid, "assistant", reply, stats=st)
        conv = s.get_conversation(cid)
    page = export.export(conv, tmp_path / "t.html").read_text("utf-8")
    p = Collector()
    p.feed(page)
    p.close()
    assert "```" not in page and "|---|" not in page  # rendered, not shown raw
    assert p.tags.count("table") == 2 and "th" in p.tags  # the reply's table, and the stats table
    assert '<pre class="hl">' in page and 'class="k"' in page  # highlighted by Pygments' python lexer
    assert "def f(x):\n    return x" in p.contents[1] and "if x:\n    y()" in p.contents[0]
    assert p.summaries == [st.summary()]
    assert "1268 ms" in st.summary() and "prefill 8 tok in 21 ms" in st.summary()
    table = page[page.index("<details"):page.index("</details>")]
    assert "1.2677" not in table and "None" not in table and "source" not in table  # no raw values
    for label, text in st.details():
        assert f"<td>{label}</td><td>{text}</td>" in table


# --- Markdown ----------------------------------------------------------------

def test_markdown_parses_back_with_a_heading_and_stats_per_message(conv, tmp_path):
    text = export.export(conv, tmp_path / "t.md").read_text("utf-8")
    tokens = MarkdownIt("commonmark").parse(text)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0] == conv.title
    assert headings[1:] == ["User (out of context)", "Assistant (out of context)", "User", "Assistant",
                            "User", "Assistant (interrupted)"]
    quotes, depth, inline = [], 0, []
    for t in tokens:
        depth += t.type == "blockquote_open"
        depth -= t.type == "blockquote_close"
        if depth and t.type == "inline":
            inline.append(t.content)
        if t.type == "blockquote_close" and not depth:
            quotes.append(" ".join(inline))
            inline = []
    assert quotes[0] == "You are <b>terse</b>."  # the system prompt
    assert quotes[1:] == [f"stats: {stats().summary()}",
                          f"stats: {stats(stop_reason='length', ttft_s=None).summary()}"]
    paragraphs = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "paragraph_open"]
    assert "Héllo 🦙 — 中文?" in paragraphs and "Hi! Line one\nline two" in paragraphs


def test_markdown_closes_a_dangling_code_fence():
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "assistant", "```python\nprint('never closed')")
        s.add_message(cid, "user", "after the fence")
        conv = s.get_conversation(cid)
    tokens = MarkdownIt("commonmark").parse(export.render(conv, "md"))
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "print('never closed')\n"
    assert any(t.type == "heading_open" for t in tokens[tokens.index(fences[0]):])


# --- text --------------------------------------------------------------------

def test_text_has_every_message_and_compact_stats(conv, tmp_path):
    lines = export.export(conv, tmp_path / "t.txt").read_text("utf-8").splitlines()
    assert lines[0] == conv.title and set(lines[1]) == {"="}
    heads = [ln for ln in lines if ln.startswith("[") and ln.endswith(":")]
    assert [h.split("] ", 1)[1] for h in heads] == [
        "User (out of context):", "Assistant (out of context):", "User:", "Assistant:", "User:",
        "Assistant (interrupted):"]
    assert [ln for ln in lines if ln.startswith("  -- ")] == [
        f"  -- {stats().summary()}", f"  -- {stats(stop_reason='length', ttft_s=None).summary()}"]
    for m in conv.messages:
        assert m.content.splitlines()[0] in lines


# --- each message's own time ----------------------------------------------------

ASKED, ANSWERED = 1778328000.0, 1778328095.0  # the reply sealed a minute and a half after the question


def _seconds(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


@pytest.fixture
def timed_turn(monkeypatch):
    """A turn written as the window writes it (question and empty reply in one transaction,
    then the reply saved and sealed), on a clock that moves between the writes."""
    clock = [ASKED]
    monkeypatch.setattr(messages, "time", SimpleNamespace(time=lambda: clock[0]))
    with Store.open() as s:
        cid, _, reply = s.begin_turn(None, "When is this?")
        clock[0] = ASKED + 40
        s.update_reply(reply, "Half")
        clock[0] = ANSWERED
        s.finish_reply(reply, "Half past, now.", stats())
        return s.get_conversation(cid)


_STAMPS = {  # each format's per-message time, in message order
    "md": re.compile(r"^## (\w+)\n\n\*(.+)\*$", re.MULTILINE),
    "txt": re.compile(r"^\[(.+)\] (\w+):$", re.MULTILINE),
    "html": re.compile(r'<span class="role">(\w+)</span><span class="when">(.+?)</span>'),
}


@pytest.mark.parametrize("fmt", ["md", "txt", "html"])
def test_each_message_shows_its_own_time(timed_turn, fmt):
    m = timed_turn.messages
    assert (m[0].created_at, m[1].created_at, m[1].updated_at) == (ASKED, ASKED, ANSWERED)  # as stored
    found = _STAMPS[fmt].findall(export.render(timed_turn, fmt))
    if fmt == "txt":
        found = [(role, t) for t, role in found]
    assert found == [("User", _seconds(ASKED)), ("Assistant", _seconds(ANSWERED))]


# --- where it is written -------------------------------------------------------

@pytest.mark.parametrize("fmt, name",
                         [("md", "a.MD"), ("json", "a.json"), ("html", "a.htm"), ("txt", "a.txt")])
def test_format_follows_the_extension(conv, tmp_path, fmt, name):
    assert export.format_for(name) == fmt
    assert (tmp_path / name).exists() is False
    written = export.export(conv, tmp_path / name).read_text("utf-8")
    if fmt == "json":  # it carries its export time
        strip = lambda text: {k: v for k, v in json.loads(text).items() if k != "exported_at"}
        assert strip(written) == strip(export.render(conv, fmt))
    else:
        assert written == export.render(conv, fmt)


@pytest.fixture
def out(tmp_path) -> Path:
    """An empty folder of its own (tmp_path also holds the test's XDG home)."""
    d = tmp_path / "out"
    d.mkdir()
    return d


def test_unknown_extension_needs_a_format(conv, out):
    with pytest.raises(ValueError, match="format"):
        export.export(conv, out / "a.docx")
    assert list(out.iterdir()) == []


def test_unwritable_paths_give_one_line_and_leave_nothing(conv, out):
    tmp_path = out
    a_file = tmp_path / "file"
    a_file.write_text("x")
    a_dir = tmp_path / "dir.md"
    a_dir.mkdir()
    for target in (tmp_path / "missing" / "out.md", a_file / "out.md", a_dir):
        with pytest.raises(ExportError) as exc:
            export.export(conv, target, "md")
        msg = str(exc.value)
        assert str(target) in msg and "\n" not in msg and "nothing was written" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.md", "file"]
    assert list(a_dir.iterdir()) == [] and a_file.read_text() == "x"


FULL_DISK = """
import resource, signal, sys
from app.history import export
from app.history.errors import ExportError
from app.history.store import Store
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
with Store.open() as s:
    cid = s.create_conversation()
    s.add_message(cid, "user", "x" * 200_000)
    conv = s.get_conversation(cid)
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))  # the disk "fills" mid-write
try:
    export.export(conv, sys.argv[1], "html")
except ExportError as e:
    print(e)
    sys.exit(3)
"""


def test_failed_write_keeps_the_old_file_whole(out):
    target = out / "keep.html"
    target.write_text("the previous export")
    r = subprocess.run([sys.executable, "-c", FULL_DISK, str(target)], capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert str(target) in r.stdout and "nothing was written" in r.stdout
    assert target.read_text() == "the previous export"
    assert [p.name for p in out.iterdir()] == ["keep.html"]


def test_render_rejects_unknown_format(conv):
    with pytest.raises(ValueError, match="unknown export format"):
        export.render(conv, "pdf")


def test_export_path_is_returned(conv, tmp_path):
    assert export.export(conv, tmp_path / "x.txt") == Path(tmp_path / "x.txt")
