"""Documents in the history: texts kept once per hash, a conversation that reopens with them, the
transcript (version 4) that carries them through export and import, and the exports that name
attachments and sources, while a conversation without any exports exactly as it did."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace

import pytest

from app.engine.message import Attachment, DocsUse, Source
from app.history import export, transcript
from app.history.documents import StoredDocument
from app.history.errors import StoreError, TranscriptError
from app.history.export import html
from app.history.store import Store

TEXT = "# Notes\n\nThe vault code is 4417.\n\nPage two starts here and says more."
SHA = hashlib.sha256(TEXT.encode("utf-8")).hexdigest()
DOC = StoredDocument(SHA, "notes <1>.md", "markdown", 2, TEXT, (0, TEXT.index("Page two")))
ATT = Attachment("notes <1>.md", SHA, "markdown", pages=2, tokens=21, chars=len(TEXT), path="/tmp/notes.md")
SOURCES = (Source(1, "notes <1>.md", SHA, "Notes", TEXT.index("The vault"), TEXT.index("Page two"),
                  "The vault code is 4417."),
           Source(2, "guide.pdf", "cd" * 32, "page 3", 10, 40, "Install *it* with pip", "manuals"))
USE = DocsUse("retrieved", 57, SOURCES)


def _conversation(s: Store, docs: bool = True) -> int:
    cid = s.create_conversation(model="gemma.gguf")
    q = s.add_message(cid, "user", "What is the vault code?")
    s.add_message(cid, "assistant", "It is 4417 [1].")
    s.add_message(cid, "tool", "12:00", tool_call_id="c1", tool_name="now",
                  tool_server="time" if docs else None)
    if docs:
        s.put_document(DOC)
        s.set_attachments(q, [ATT])
        s.set_docs(q + 1, USE)
    return cid


def test_a_document_is_kept_once_per_hash_and_read_back(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        assert s.document(SHA) is None
        s.put_document(DOC)
        s.put_document(replace(DOC, name="renamed.md"))  # the same text again: the first stays
        assert s.document(SHA) == DOC
        n = s._conn.execute("SELECT count(*) FROM documents").fetchone()[0]
    assert n == 1


def test_a_conversation_reopens_with_its_attachments_texts_and_sources(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        cid = _conversation(s)
    with Store.open(tmp_path / "h.db") as s:  # a new process's open
        conv = s.get_conversation(cid)
    q, a = conv.messages[0], conv.messages[1]
    assert q.content == "What is the vault code?" and q.attachments == (ATT,)
    assert a.docs == USE and conv.messages[2].tool_server == "time"
    assert conv.documents == {SHA: DOC.to_json()}
    assert TEXT[a.docs.sources[0].start:a.docs.sources[0].end].startswith("The vault code is 4417.")


def test_attachments_and_sources_go_only_on_their_own_roles(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        cid = s.create_conversation()
        q = s.add_message(cid, "user", "q")
        r = s.add_message(cid, "assistant", "a")
        with pytest.raises(ValueError, match="only a user message has attachments"):
            s.set_attachments(r, [ATT])
        with pytest.raises(ValueError, match="only a assistant message has docs"):
            s.set_docs(q, USE)
        with pytest.raises(StoreError, match="no message with id 999"):
            s.set_docs(999, USE)
        assert s.get_conversation(cid).messages[0].attachments == ()


def test_the_transcript_carries_documents_as_version_4_and_imports_them(tmp_path):
    with Store.open(tmp_path / "a.db") as s:
        conv = s.get_conversation(_conversation(s))
    path = export.export(conv, tmp_path / "t.json")
    doc = json.loads(path.read_text("utf-8"))
    assert doc["version"] == transcript.VERSION == 4
    msgs = doc["conversation"]["messages"]
    assert msgs[0]["attachments"][0]["sha256"] == SHA and "docs" not in msgs[0]
    assert msgs[1]["docs"]["mode"] == "retrieved" and [x["n"] for x in msgs[1]["docs"]["sources"]] == [1, 2]
    assert msgs[2]["tool_server"] == "time"
    assert doc["conversation"]["documents"][SHA]["text"] == TEXT

    with Store.open(tmp_path / "b.db") as s:  # another machine's history: the text comes with it
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
        assert s.document(SHA) == DOC
    assert back.messages[0].attachments == (ATT,) and back.messages[1].docs == USE
    assert back.documents == {SHA: DOC.to_json()}
    again = json.loads(export.render(back, "json"))
    for d in (again, doc):
        d.pop("exported_at")
        for m in d["conversation"]["messages"]:
            m.pop("id"), m.pop("parent_id")
        d["conversation"].pop("id"), d["conversation"].pop("active_leaf")
    assert again == doc


def test_a_transcript_without_documents_is_the_document_it_was(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        doc = json.loads(export.render(s.get_conversation(_conversation(s, docs=False)), "json"))
    assert doc["version"] == transcript.PLAIN_VERSION == 2
    assert "documents" not in doc["conversation"]
    assert all(k not in m for m in doc["conversation"]["messages"]
               for k in ("attachments", "docs", "tool_server"))


@pytest.mark.parametrize("edit, says", [
    (lambda c: c["documents"][SHA].update(text=TEXT + "!"), "does not match its sha256"),
    (lambda c: c["messages"][1]["docs"].update(mode="some"), "is not whole or retrieved"),
    (lambda c: c["messages"][0]["attachments"][0].pop("sha256"), "has no 'sha256'"),
    (lambda c: c["messages"][1].update(attachments=c["messages"][0]["attachments"]), "only a user message"),
    (lambda c: c["documents"][SHA].update(page_starts=[0, 10**6]), "offsets into its text"),
])
def test_a_bad_document_field_is_one_line_and_imports_nothing(tmp_path, edit, says):
    with Store.open(tmp_path / "h.db") as s:
        doc = transcript.to_document(s.get_conversation(_conversation(s)))
    edit(doc["conversation"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(TranscriptError, match=says) as e:
        transcript.load(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_exports_name_attachments_sources_and_the_mcp_server(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        conv = s.get_conversation(_conversation(s))
    md, page, txt = (export.render(conv, f) for f in ("md", "html", "txt"))
    for out in (md, txt):
        assert "Retrieved 2 passages · 57 tokens" in out and "MCP server time" in out
    assert "- notes \\<1\\>.md (markdown, 2 pages, 21 tokens)" in md  # a name is text, not markup
    assert "- \\[2\\] guide.pdf, page 3 (collection manuals): “Install \\*it\\* with pip”" in md
    assert "Attached: notes <1>.md (markdown, 2 pages, 21 tokens)" in txt
    assert "  [1] notes <1>.md, Notes: “The vault code is 4417.”" in txt
    assert "notes &lt;1&gt;.md (markdown, 2 pages, 21 tokens)" in page and "<1>" not in page
    assert "[2] guide.pdf, page 3 (collection manuals): “Install *it* with pip”" in page
    assert ".docs {" in page and "MCP server time" in page
    whole = replace(conv.messages[1], docs=DocsUse("whole", 812, SOURCES[:1]))
    conv.messages[1] = whole
    assert "Documents given whole · 812 tokens" in export.render(conv, "txt")


def test_without_documents_the_exports_are_what_they_were(tmp_path):
    """The same conversation with and without its documents: the lines the documents add are all
    that differs, so a conversation without any writes exactly what it wrote before."""
    with Store.open(tmp_path / "h.db") as s:
        with_docs = s.get_conversation(_conversation(s))
    bare = replace(with_docs, documents={}, tree=[], messages=[
        replace(m, attachments=(), docs=None, tool_server=None) for m in with_docs.messages])
    with_docs.tree = []
    for fmt, added in (("md", r"\*\*Attached:\*\*\n\n- .*\n\n|\*\*Retrieved .*\*\*\n\n(- .*\n)+\n"),
                       ("txt", r"Attached: .*\n|Retrieved .*:\n(  \[.*\n)+"),
                       ("html", r'<div class="docs [a-z]+">.*?</div>')):
        a, b = export.render(with_docs, fmt).replace(html.DOCS_CSS, ""), export.render(bare, fmt)
        a = a.replace(", MCP server time", "").replace('<span class="mark">MCP server time</span>', "")
        a = a.replace(" from MCP server `time`", "").replace(" from MCP server <code>time</code>", "")  # card
        if fmt == "md":
            a = a.replace("## Tool (MCP server time)", "## Tool")
        elif fmt == "txt":
            a = a.replace("Tool (MCP server time):", "Tool:")
        assert re.sub(added, "", a, flags=re.DOTALL if fmt == "html" else 0) == b, fmt
    assert "docs" not in export.render(bare, "html")


def test_a_fork_keeps_the_documents_of_its_path(tmp_path):
    with Store.open(tmp_path / "h.db") as s:
        cid = _conversation(s)
        reply = s.get_conversation(cid).messages[1]
        fork = s.get_conversation(s.fork(cid, reply.id))
    assert fork.messages[0].attachments == (ATT,) and fork.messages[1].docs == USE
    assert fork.documents == {SHA: DOC.to_json()}
