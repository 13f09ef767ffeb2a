"""`llamadesk ask --attach FILE` and `ask --docs NAME` through the real command on the real model:
the answer followed by its numbered sources, "whole" or "retrieved" on stderr, the turn saved
with its attachments and sources (and `list ID --json` showing them), and a file that cannot be
used refused in one line before anything loads."""

from __future__ import annotations

import json

import pytest
from pypdf import PdfWriter

from app.history.store import Store
from tests.chat.test_documents import NOTES, QUESTION, long_text
from tests.commands.test_cli_history import llamadesk, one_line_error


def model_args(model_path, n: int = 16, ctx: int = 2048) -> list[str]:
    return ["--model", str(model_path), "--ctx", str(ctx), "--temperature", "0", "--max-tokens", str(n)]


@pytest.fixture
def notes(tmp_path):
    p = tmp_path / "vault.md"
    p.write_text(NOTES, "utf-8")
    return p


def test_ask_attach_gives_a_small_file_whole_and_prints_its_source(model_path, notes):
    r = llamadesk("ask", "--attach", str(notes), QUESTION, *model_args(model_path, 24))
    assert r.returncode == 0, r.stderr
    answer, _, sources = r.stdout.partition("\nSources (whole):\n")
    assert answer.strip()  # its words are the model's own: the prompt held the file (below)
    assert sources.startswith("[1] vault.md: “# Vault The vault code is 4417.")
    assert "llamadesk: documents: whole · " in r.stderr
    with Store.open() as s:
        cid = s.list_conversations()[0].id
        conv = s.get_conversation(cid)
    question, reply = conv.messages
    assert question.content == QUESTION and [a.name for a in question.attachments] == ["vault.md"]
    assert question.attachments[0].tokens > 0 and reply.docs.mode == "whole"
    assert reply.stats.prompt_tokens >= reply.docs.tokens > 0
    assert conv.documents[question.attachments[0].sha256]["text"].startswith("# Vault")
    listed = llamadesk("list", str(cid), "--json")
    assert listed.returncode == 0, listed.stderr
    msgs = json.loads(listed.stdout)
    assert msgs[0]["attachments"][0]["name"] == "vault.md" and "docs" not in msgs[0]
    assert msgs[1]["docs"]["mode"] == "whole" and msgs[1]["docs"]["sources"][0]["n"] == 1

    # The next question of the conversation still has the document, without attaching it again.
    r = llamadesk("ask", "Say the code again.", "--continue", str(cid), *model_args(model_path, 12))
    assert r.returncode == 0, r.stderr
    assert "documents: whole" in r.stderr and "Sources (whole):\n[1] vault.md" in r.stdout


def test_ask_attach_retrieves_from_a_long_file_in_a_small_context_unsaved(model_path, tmp_path):
    doc = tmp_path / "long.txt"
    doc.write_text(long_text(), "utf-8")
    r = llamadesk("ask", "--attach", str(doc), "--json", "--no-save", "Which pickle protocol is the highest?",
                  *model_args(model_path, 16, ctx=2048))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["docs"]["mode"] == "retrieved" and out["attachments"][0]["name"] == "long.txt"
    assert out["conversation"] is None and out["attachments"][0]["tokens"] > 2048
    sources = out["docs"]["sources"]
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1)) and len(sources) >= 2
    text = doc.read_text("utf-8")
    for s in sources:
        assert " ".join(text[s["start"]:s["end"]].split()).startswith(s["snippet"].rstrip("…"))
    assert f"documents: retrieved {len(sources)} passages · " in r.stderr
    assert out["stats"]["prompt_tokens"] + 16 <= 2048
    with Store.open() as s:
        assert s.list_conversations() == []


def test_ask_docs_searches_a_collection(model_path, tmp_path):
    folder = tmp_path / "house"
    folder.mkdir()
    (folder / "vault.md").write_text(NOTES, "utf-8")
    (folder / "garden.md").write_text("# Garden\n\nThe roses are red and the shed is green.\n", "utf-8")
    added = llamadesk("docs", "add", str(folder), "--name", "house")
    assert added.returncode == 0, added.stderr
    r = llamadesk("ask", "--docs", "house", QUESTION, *model_args(model_path, 16))
    assert r.returncode == 0, r.stderr
    assert "documents: retrieved" in r.stderr
    listed = r.stdout.partition("\nSources (retrieved):\n")[2].splitlines()
    assert listed[0].startswith("[1] vault.md") and "(collection house)" in listed[0]
    with Store.open() as s:
        conv = s.get_conversation(s.list_conversations()[0].id)
    assert conv.settings["collections"] == ["house"]
    assert conv.messages[1].docs.sources[0].collection == "house"


def test_documents_that_cannot_be_used_are_one_line_and_nothing_is_saved(tmp_path, notes):
    locked = tmp_path / "locked.pdf"
    w = PdfWriter()
    w.add_blank_page(200, 200)
    w.encrypt("secret")
    w.write(locked)
    cases = [
        (["--attach", str(tmp_path / "gone.md")], "gone.md: cannot be opened"),
        (["--attach", str(notes), "--attach", str(locked)], "locked.pdf: encrypted PDF"),
        (["--docs", "nowhere"], "--docs nowhere: there is no such collection (indexed: none yet"),
        (["--docs", ","], "--docs: a collection name is empty"),
    ]
    for args, says in cases:
        assert says in one_line_error(llamadesk("ask", QUESTION, *args, "--model", "/nonexistent.gguf"))
    with Store.open() as s:
        assert s.list_conversations() == []
