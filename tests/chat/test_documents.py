"""Documents in a turn with the real model: a small file whole, a long one retrieved in a small
context, a collection searched, and what the store keeps of it (the user's words, the
attachments, their texts by hash, the reply's sources) reopening as the window shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.conversation import LiveConversation
from app.chat.doc_prompt import RETRIEVED_HEAD, WHOLE_HEAD
from app.chat.documents import DocumentError, attach, plan_turn, room_tokens, token_counter
from app.chat.recorder import TurnRecorder, record_turn
from app.docs.extract import extract
from app.docs.index import DocsIndex
from app.engine.sampling import GenerationSettings
from app.history.store import Store

PYTHON_DOC = Path("/usr/share/doc/python3.11/html/_sources/library/pickle.rst.txt")
REPO = Path(__file__).resolve().parents[2]
NOTES = "# Vault\n\nThe vault code is 4417. Nobody else knows it.\n\n## Other\n\nThe door is blue.\n"
QUESTION = "What is the vault code?"


def greedy(n: int) -> GenerationSettings:
    return GenerationSettings(max_tokens=n, temperature=0.0, seed=1)


def long_text() -> str:
    """About 40 KB of real prose nobody here wrote for the test: the Python docs' pickle page, or
    where python3-doc is not installed, this repository's README and its chat sources."""
    if PYTHON_DOC.is_file():
        return PYTHON_DOC.read_text("utf-8")
    parts = [(REPO / "README.md").read_text("utf-8")]
    parts += [p.read_text("utf-8") for p in sorted((REPO / "app" / "chat").glob("*.py"))]
    return "\n\n".join(parts)[:45_000]


@pytest.fixture
def notes(tmp_path) -> Path:
    p = tmp_path / "vault notes.md"
    p.write_text(NOTES, "utf-8")
    return p


@pytest.fixture
def long_doc(tmp_path) -> Path:
    p = tmp_path / "pickle.txt"
    p.write_text(long_text(), "utf-8")
    assert p.stat().st_size > 35_000
    return p


def test_attach_reads_the_file_and_counts_its_tokens(engine, notes):
    count = token_counter(engine)
    att, ex = attach(notes, count)
    assert (att.name, att.kind, att.sha256, att.chars, att.path) == \
           ("vault notes.md", "markdown", ex.sha256, len(ex.text), str(notes))
    assert "The vault code is 4417." in ex.text
    assert att.tokens == count(ex.text) and 10 < att.tokens < len(ex.text)


def test_a_file_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    with pytest.raises(DocumentError) as e:
        attach(tmp_path / "gone.md")
    assert "gone.md" in str(e.value) and "\n" not in str(e.value)


def test_a_small_file_goes_whole_and_is_kept_with_the_turn(engine, notes, tmp_path):
    count = token_counter(engine)
    att, ex = attach(notes, count)
    room = room_tokens(engine, None, [], QUESTION, 24)
    plan = plan_turn(QUESTION, [(att, ex.text, ex.page_starts)], [], room, count, None)
    use = plan.use
    assert use is not None and use.mode == "whole"
    assert plan.user_text.startswith(WHOLE_HEAD) and plan.user_text.endswith(f"Question: {QUESTION}")
    assert ex.text in plan.user_text and "[1] vault notes.md" in plan.user_text
    assert use.tokens == count(plan.user_text) - count(QUESTION) and 0 < use.tokens <= room
    assert [(s.n, s.document, s.sha256, s.start, s.end) for s in use.sources] == \
           [(1, "vault notes.md", ex.sha256, 0, len(ex.text))]

    with Store.open(tmp_path / "h.db") as store:
        turn = record_turn(TurnRecorder(store), engine, None, QUESTION, greedy(24), docs=plan,
                           attachments=[(att, ex)], collections=["manuals"])
        conv = store.get_conversation(turn.conversation_id)
    question, reply = conv.messages
    assert question.content == QUESTION and question.attachments == (att,)  # the words alone
    assert reply.docs == use and reply.content
    assert reply.stats.prompt_tokens >= use.tokens
    assert conv.documents[ex.sha256]["text"] == ex.text
    live = LiveConversation.from_store(conv)
    assert live.attachments() == [att] and live.collections == ["manuals"]
    assert live.attached() == [(att, ex.text, ex.page_starts)]
    assert live.messages[1].docs == use


def test_a_long_document_in_a_small_context_is_retrieved_with_numbered_sources(engine, long_doc, tmp_path):
    count = token_counter(engine)
    att, ex = attach(long_doc, count)
    assert att.tokens > engine.n_ctx  # it cannot go whole in 2,048 tokens
    question = "What does the pickle protocol version number mean, and which is the highest protocol?"
    room = room_tokens(engine, None, [], question, 64)
    with DocsIndex.open(tmp_path / "docs.db") as index:
        plan = plan_turn(question, [(att, ex.text, ex.page_starts)], [], room, count, index)
        assert index.text(ex.sha256) == ex.text  # indexed by its hash, once
    use = plan.use
    assert use is not None and use.mode == "retrieved" and plan.user_text.startswith(RETRIEVED_HEAD)
    assert [s.n for s in use.sources] == list(range(1, len(use.sources) + 1)) and len(use.sources) >= 2
    assert 0 < use.tokens <= room and use.tokens == count(plan.user_text) - count(question)
    for s in use.sources:
        passage = ex.text[s.start:s.end]
        assert s.sha256 == ex.sha256 and s.document == "pickle.txt" and s.collection is None
        assert passage.strip() and passage.strip() in plan.user_text  # the span is what was given
        assert f"[{s.n}] pickle.txt" in plan.user_text
        assert " ".join(passage.split()).startswith(s.snippet.rstrip("…"))
    assert any("protocol" in ex.text[s.start:s.end].lower() for s in use.sources)
    reply = engine.reply([], plan.user_text, greedy(16))
    assert reply.stats.error is None and not reply.dropped
    assert reply.stats.prompt_tokens + 16 <= engine.n_ctx


def test_a_collection_is_searched_even_when_small(engine, notes, tmp_path):
    count = token_counter(engine)
    with DocsIndex.open(tmp_path / "docs.db") as index:
        index.add(extract(notes), collection="house")
        plan = plan_turn(QUESTION, [], ["house"], 1500, count, index)
    use = plan.use
    assert use is not None and use.mode == "retrieved"
    assert use.sources[0].collection == "house" and "4417" in NOTES[use.sources[0].start:use.sources[0].end]


def test_a_question_in_other_words_still_gets_the_documents_first_passages(engine, long_doc):
    count = token_counter(engine)
    att, ex = attach(long_doc)
    plan = plan_turn("zzyzx qwv", [(att, ex.text, ex.page_starts)], [], 400, count, None)
    use = plan.use
    assert use is not None and use.mode == "retrieved" and use.sources
    assert use.sources[0].start < 200  # from where the document begins


def test_the_room_leaves_the_reply_its_budget_and_counts_the_history(engine):
    from app.engine.message import MessageBody

    bare = room_tokens(engine, None, [], QUESTION, 100)
    history = [MessageBody("user", "hello " * 50), MessageBody("assistant", "hi " * 50)]
    assert bare < engine.n_ctx - 100
    assert room_tokens(engine, None, history, QUESTION, 100) < bare - 80
    # A history that leaves under a quarter: the documents get the quarter, old turns make way.
    long_history = [MessageBody("user", "word " * 1500), MessageBody("assistant", "ok")]
    assert room_tokens(engine, None, long_history, QUESTION, 100) == engine.n_ctx // 4


def test_a_turn_s_collections_are_kept_and_changed_between_turns(engine, tmp_path):
    with Store.open(tmp_path / "h.db") as store:
        rec = TurnRecorder(store)
        turn = record_turn(rec, engine, None, "Hi", greedy(2), collections=["a", "b"])
        cid = turn.conversation_id
        record_turn(rec, engine, cid, "Again", greedy(2))  # None keeps the conversation's
        assert store.get_conversation(cid).settings["collections"] == ["a", "b"]
        rec.save_collections(cid, ["b"])
        assert LiveConversation.from_store(store.get_conversation(cid)).collections == ["b"]
        rec.save_collections(cid, [])
        assert "collections" not in store.get_conversation(cid).settings
