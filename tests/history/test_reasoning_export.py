"""A reply's reasoning in every export: folded before the answer in Markdown and HTML, marked off
in text, kept exactly by the JSON transcript through export and import; a reply without reasoning
exports as it did, and version 2 and 1 transcripts still import. Real store, real parsers."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app.engine.stats import ReplyStats
from app.history import export, transcript
from app.history.errors import TranscriptError
from app.history.records import INTERRUPTED, StoredConversation
from app.history.store import Store
from tests.transcripts import by_position

ROOT = Path(__file__).resolve().parents[2]
# Reasoning that tries to end its fold early, open a fence it never closes, and run a script;
# with leading spaces, a blank line and a trailing newline that must come back exactly.
THOUGHT = ("  The user asks 91.\n\nIs it 7 x 13? </details> <script>alert(1)</script>\n"
           "```python\nprint(7 * 13)\n")
SUMMARY = "Thought for 12.4 s · 431 tokens"


def stats(**kw) -> ReplyStats:
    base = dict(ttft_s=0.2, prefill_tokens=40, cached_tokens=0, prefill_s=0.04, prefill_tok_s=1000.0,
                decode_tokens=450, decode_s=13.0, decode_tok_s=34.6, total_s=13.3, kv_used=490, n_ctx=4096,
                stop_reason="stop", reasoning_tokens=431, reasoning_s=12.4, ttfa_s=12.6)
    return ReplyStats(**{**base, **kw})


@pytest.fixture
def conv() -> StoredConversation:
    """A question answered after thinking, a plain question and answer, and a reply cut off while
    it was still thinking (no answer yet)."""
    with Store.open() as s:
        cid, _q, r = s.begin_turn(None, "Is 91 prime?")
        s.update_reply(r, "", THOUGHT)
        s.finish_reply(r, "No: 91 = 7 x 13.", stats())
        _c, _q, r2 = s.begin_turn(cid, "And 97?")
        s.finish_reply(r2, "97 is prime.", stats(reasoning_tokens=None, reasoning_s=None, ttfa_s=None))
        _c, _q, r3 = s.begin_turn(cid, "And 1001?")
        s.finish_reply(r3, "", None, state=INTERRUPTED, reasoning="1001 = 7 x 11 x")
        return s.get_conversation(cid)


def without_reasoning(conv: StoredConversation, figures_too: bool = False) -> StoredConversation:
    """The same conversation with no reasoning text (and with `figures_too`, none in the stats:
    a model that does not think)."""
    out = copy.deepcopy(conv)
    out.tree = [replace(m, reasoning="", stats=replace(m.stats, reasoning_tokens=None, reasoning_s=None,
                                                       ttfa_s=None) if figures_too and m.stats else m.stats)
                for m in out.tree]
    by_id = {m.id: m for m in out.tree}
    out.messages = [by_id[m.id] for m in out.messages]
    return out


# --- Markdown ----------------------------------------------------------------

def test_markdown_folds_the_reasoning_before_the_answer_and_nothing_in_it_ends_the_fold(conv):
    md = export.render(conv, "md")
    first = md.index("<details><summary>" + SUMMARY + "</summary>")
    assert first < md.index("No: 91 = 7 x 13.") and md.index("Is 91 prime?") < first
    html = MarkdownIt("commonmark").render(md)
    assert html.count("<details>") == html.count("</details>") == 2, "a fold per reply with reasoning"
    fold = html[html.index("<details>"):html.index("</details>")]
    assert "The user asks 91." in fold and "print(7 * 13)" in fold
    assert "&lt;/details>" in md and "&lt;/details&gt;" in fold  # an entity: shown as the text it is
    assert "No: 91 = 7 x 13." not in fold and "No: 91 = 7 x 13." in html[html.index("</details>"):]
    assert "<details><summary>Thinking</summary>" in md  # no stats: no figures to give
    assert md.count("*(empty)*") == 0  # the reply cut off while thinking is its fold


def test_markdown_with_reasoning_is_the_same_file_plus_the_folds(conv):
    md, plain = export.render(conv, "md"), export.render(without_reasoning(conv), "md")
    assert "<details>" not in plain and "Thought for" not in plain
    folds = re.compile(r"<details><summary>.*?</summary>\n\n.*?\n\n</details>\n(?:\n|\Z)", re.DOTALL)
    # The reply cut off while thinking (the file's last) reads "(empty)" without its fold, as before.
    assert plain.endswith("*(empty)*\n") and folds.sub("", md) == plain.removesuffix("*(empty)*\n")


# --- HTML --------------------------------------------------------------------

class Folds(HTMLParser):
    """Each <details class="thinking">: its summary and its text, and where the answer is."""

    def __init__(self):
        super().__init__()
        self.folds: list[dict] = []
        self.stack: list[str] = []
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "details" and a.get("class") == "thinking":
            self.folds.append({"summary": "", "body": "", "at": len("".join(self.text))})
            self.stack.append("thinking")
        elif tag == "summary" and self.stack and self.stack[-1] == "thinking":
            self.stack.append("fold-summary")
        else:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack:
            top = self.stack.pop()
            if top == tag or (top, tag) in (("thinking", "details"), ("fold-summary", "summary")):
                break

    def handle_data(self, data):
        self.text.append(data)
        if "fold-summary" in self.stack:
            self.folds[-1]["summary"] += data
        elif "thinking" in self.stack:
            self.folds[-1]["body"] += data


def test_html_folds_the_reasoning_under_how_long_it_thought(conv):
    page = export.render(conv, "html")
    p = Folds()
    p.feed(page)
    assert p.scripts == 0, "reasoning is model output: escaped like the answer"
    assert [f["summary"] for f in p.folds] == [SUMMARY, "Thinking"]
    body = p.folds[0]["body"]
    assert "The user asks 91." in body and "</details> <script>alert(1)</script>" in body
    assert "print(7 * 13)" in p.folds[0]["body"] and "No: 91 = 7 x 13." not in p.folds[0]["body"]
    text = "".join(p.text)
    assert p.folds[0]["at"] < text.index("No: 91 = 7 x 13.")
    assert ".thinking {" in page


def test_html_without_reasoning_has_no_fold_and_no_style_for_one(conv):
    page = export.render(without_reasoning(conv, figures_too=True), "html")
    assert 'class="thinking"' not in page and ".thinking" not in page and "Thought for" not in page


# --- text --------------------------------------------------------------------

def test_text_marks_every_line_of_the_reasoning_before_the_answer(conv):
    txt = export.render(conv, "txt")
    lines = txt.splitlines()
    at = lines.index(SUMMARY + ":")
    assert lines[at - 1].endswith("Assistant:")
    assert lines[at + 1: at + 7] == ["  |   The user asks 91.", "  |",
                                     "  | Is it 7 x 13? </details> <script>alert(1)</script>",
                                     "  | ```python", "  | print(7 * 13)", "No: 91 = 7 x 13."]
    cut = lines.index("Thinking:")
    assert lines[cut + 1] == "  | 1001 = 7 x 11 x" and "interrupted" in lines[cut - 1]
    plain = export.render(without_reasoning(conv), "txt")
    assert "  | " not in plain and "Thinking:" not in plain
    marked = re.compile(r"^(Thought for .*|Thinking):\n(  \|.*\n)+", re.MULTILINE)
    # The reply cut off while thinking had an empty line for its answer, as before.
    assert marked.sub("", txt) == plain.replace("interrupted):\n\n", "interrupted):\n", 1)


# --- JSON transcript ---------------------------------------------------------

def test_the_transcript_carries_reasoning_as_version_3_and_imports_it_exactly(conv, tmp_path):
    path = export.export(conv, tmp_path / "t.json")
    doc = json.loads(path.read_text("utf-8"))
    assert doc["version"] == transcript.THINKING_VERSION == 3
    msgs = doc["conversation"]["messages"]
    assert [m.get("reasoning") for m in msgs] == [None, THOUGHT, None, None, None, "1001 = 7 x 11 x"]
    assert msgs[1]["stats"]["reasoning_tokens"] == 431 and msgs[1]["stats"]["ttfa_s"] == 12.6

    with Store.open() as s:
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
    assert [(m.role, m.content, m.reasoning) for m in back.tree] == \
           [(m.role, m.content, m.reasoning) for m in conv.tree]
    assert back.tree[1].reasoning == THOUGHT and back.tree[1].stats == conv.tree[1].stats
    again = json.loads(export.render(back, "json"))
    assert by_position(again) == by_position(doc)


def test_a_transcript_without_reasoning_is_the_version_2_document_it_was(conv):
    doc = json.loads(export.render(without_reasoning(conv), "json"))
    assert doc["version"] == transcript.PLAIN_VERSION == 2
    assert all("reasoning" not in m for m in doc["conversation"]["messages"])


V2 = {
    "format": "llamadesk.transcript", "version": 2, "app_version": "0.1.0",
    "exported_at": "2026-05-09T12:00:00+00:00",
    "conversation": {
        "id": 3, "title": "Capital", "created_at": 1778328000.1, "updated_at": 1778328042.5,
        "system_prompt": None, "model": "gemma-3-270m-q4_k_m.gguf", "settings": {}, "active_leaf": 12,
        "messages": [
            {"id": 10, "parent_id": None, "role": "user", "content": "What is the capital of France?",
             "created_at": 1778328000.2, "updated_at": 1778328000.2, "state": "complete",
             "out_of_context": False, "edited": False, "stats": None},
            {"id": 12, "parent_id": 10, "role": "assistant", "content": "Paris.",
             "created_at": 1778328000.3, "updated_at": 1778328001.1, "state": "complete",
             "out_of_context": False, "edited": False,
             "stats": {"ttft_s": 0.118, "prefill_tokens": 13, "cached_tokens": 0, "prefill_s": 0.014,
                       "prefill_tok_s": 928.6, "decode_tokens": 10, "decode_s": 0.098, "decode_tok_s": 102.0,
                       "total_s": 0.21, "kv_used": 22, "n_ctx": 4096, "stop_reason": "stop"}},
        ],
    },
}


def test_a_version_2_transcript_still_imports_and_exports_as_version_2(tmp_path):
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(V2), "utf-8")
    with Store.open() as s:
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
    assert [(m.content, m.reasoning, m.parent_id is None) for m in back.tree] == \
           [("What is the capital of France?", "", True), ("Paris.", "", False)]
    assert back.tree[1].stats.reasoning_tokens is None and back.tree[1].stats.ttfa_s is None
    again = json.loads(export.render(back, "json"))
    assert again["version"] == 2
    expected = by_position(V2)
    expected.pop("app_version")
    got = by_position(again)
    got.pop("app_version")
    for m in got["conversation"]["messages"]:  # fields of today's stats record, at their defaults
        if m["stats"]:
            old = expected["conversation"]["messages"][1]["stats"]
            m["stats"] = {k: v for k, v in m["stats"].items() if k in old}
    for key in ("reply_format", "tools"):
        assert got["conversation"].pop(key) is None
    for m in got["conversation"]["messages"]:
        assert m.pop("format") is None
    assert got == expected


def test_a_version_1_transcript_still_imports(tmp_path):
    doc = copy.deepcopy(V2)
    doc["version"] = 1
    for m in doc["conversation"]["messages"]:
        del m["id"], m["parent_id"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(doc), "utf-8")
    conv = transcript.load(path)
    assert [(m.content, m.reasoning) for m in conv.messages] == \
           [("What is the capital of France?", ""), ("Paris.", "")]


@pytest.mark.parametrize(("where", "value", "error"), [
    (0, "I thought",
     "messages[0].reasoning: only an assistant message has reasoning, and this one is 'user'"),
    (1, 42, "messages[1].reasoning should be str, not int"),
    (1, "\ud800", "messages[1].reasoning is not valid UTF-8 text"),
])
def test_bad_reasoning_is_refused_in_one_line_and_nothing_is_imported(tmp_path, where, value, error):
    doc = copy.deepcopy(V2)
    doc["version"] = 3
    doc["conversation"]["messages"][where]["reasoning"] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), "utf-8")
    with Store.open() as s:
        before = len(s.list_conversations())
        with pytest.raises(TranscriptError) as e:
            s.import_conversation(transcript.load(path))
        assert len(s.list_conversations()) == before
    assert error in str(e.value) and "\n" not in str(e.value)


def test_the_documented_example_imports_with_its_reasoning():
    text = (ROOT / "docs" / "transcript-format.md").read_text("utf-8")
    example = re.search(r"```json\n(.*?)\n```", text, re.DOTALL)
    assert example is not None
    conv = transcript.from_document(json.loads(example.group(1)))
    assert conv.messages[-1].reasoning == "The user asks for France's capital. That is Paris."
    assert conv.messages[-1].stats.reasoning_tokens == 12 and conv.tree[1].reasoning == ""
