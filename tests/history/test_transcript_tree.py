"""The JSON transcript's version 2 carries the whole tree, and imports it back exactly.

A branched conversation (an edited question, regenerated replies, a path shown that is not the
latest) exported and imported comes back with the same shape, texts, active path and stats, ids
renumbered; a document whose parents do not make a tree (a loop, a parent written later, a missing
or doubled id) is one line naming where, and writes nothing; version 1 files still read, as a line;
and a tree a hand-edited database has bent still exports to a file that reads back. Real SQLite in
the test's XDG data dir; the generated cases are derandomized.
"""

from __future__ import annotations

import copy
import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.history import export, transcript
from app.history.errors import TranscriptError
from app.history.records import StoredConversation, StoredMessage
from app.history.store import Store, default_path
from tests.store_rows import row_counts
from tests.transcripts import branched, by_position, shape, stats


def test_a_branched_conversation_exports_and_imports_as_the_same_tree(tmp_path):
    with Store.open() as s:
        cid = branched(s)
        conv = s.get_conversation(cid)
        assert len(conv.tree) == 14 and [m.content for m in conv.messages][-1] == "answer 5, again 1"
        path = export.export(conv, tmp_path / "tree.json")
        doc = json.loads(path.read_text("utf-8"))
        c = doc["conversation"]
        assert doc["version"] == 2 and len(c["messages"]) == 14
        assert [m["id"] for m in c["messages"]] == [m.id for m in conv.tree]
        assert [m["parent_id"] for m in c["messages"]] == [m.parent_id for m in conv.tree]
        assert c["active_leaf"] == conv.messages[-1].id

        before = row_counts(s.path)
        new = s.import_conversation(transcript.load(path))
        back = s.get_conversation(new)
    assert row_counts(default_path()) == (before[0] + 1, before[1] + 14)
    assert shape(back) == shape(conv)
    assert [m.content for m in back.tree] == [m.content for m in conv.tree]
    assert [m.stats for m in back.tree] == [m.stats for m in conv.tree]
    where, there = ({m.id: i for i, m in enumerate(x.tree)} for x in (conv, back))
    assert [there[m.id] for m in back.messages] == [where[m.id] for m in conv.messages]  # the path shown
    assert not {m.id for m in back.tree} & {m.id for m in conv.tree}  # renumbered
    assert [len(back.alternatives(m)) for m in back.messages] == \
           [len(conv.alternatives(m)) for m in conv.messages]
    assert by_position(transcript.to_document(back)) == by_position(transcript.to_document(conv))


def test_edited_replies_keep_their_mark(tmp_path):
    with Store.open() as s:
        cid = s.create_conversation()
        q = s.add_message(cid, "user", "hi")
        s.add_message(cid, "assistant", "hello, rewritten", parent_id=q, edited=True)
        path = export.export(s.get_conversation(cid), tmp_path / "e.json")
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
    assert [m.edited for m in back.messages] == [False, True]


def v1(doc: dict) -> dict:
    """The document as version 1 wrote it: a line, no ids."""
    doc = copy.deepcopy(doc)
    doc["version"] = 1
    doc["conversation"].pop("active_leaf")
    for m in doc["conversation"]["messages"]:
        for k in ("id", "parent_id", "edited"):
            m.pop(k)
    return doc


def test_a_version_1_file_still_reads_as_a_line(tmp_path):
    with Store.open() as s:
        cid = s.create_conversation()
        for role, text in (("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")):
            s.add_message(cid, role, text)
        p = tmp_path / "v1.json"
        p.write_text(json.dumps(v1(transcript.to_document(s.get_conversation(cid)))), "utf-8")
        conv = transcript.load(p)
        assert conv.tree == [] and [m.content for m in conv.messages] == ["a", "b", "c", "d"]
        back = s.get_conversation(s.import_conversation(conv))
    assert shape(back) == [None, 0, 1, 2] and back.messages == back.tree


def test_a_conversation_held_in_memory_exports_as_a_line():
    msgs = [StoredMessage(role, text, id=0, conversation_id=0, created_at=1.0, updated_at=1.0)
            for role, text in (("user", "a"), ("assistant", "b"))]
    doc = transcript.to_document(StoredConversation(0, "t", 1.0, 1.0, messages=msgs))
    assert [(m["id"], m["parent_id"]) for m in doc["conversation"]["messages"]] == [(1, None), (2, 1)]
    assert doc["conversation"]["active_leaf"] == 2


# -- documents that are not a tree -----------------------------------------------------------

def _doc() -> dict:
    """A small valid tree: 10 <- 20 <- 30, and 40 beside 20 (a second reply); shown: 40."""
    def m(i, parent, role):
        return {"id": i, "parent_id": parent, "role": role, "content": f"m{i}", "created_at": 1733040000.0,
                "state": "complete", "stats": None}
    return {"format": transcript.FORMAT, "version": 2, "conversation": {
        "title": "t", "created_at": 1733040000.0, "updated_at": 1733040000.0, "active_leaf": 40,
        "messages": [m(10, None, "user"), m(20, 10, "assistant"), m(30, 20, "user"), m(40, 10, "assistant")]}}


def _msgs(doc):
    return doc["conversation"]["messages"]


BAD_TREES = {
    "a loop of two": (lambda d: (_msgs(d)[1].update(parent_id=30)),
                      "messages[1].parent_id 30 is the id of messages[2], written after it"),
    "its own parent": (lambda d: _msgs(d)[2].update(parent_id=30),
                       "messages[2].parent_id 30 is the message's own id"),
    "a parent from nowhere": (lambda d: _msgs(d)[3].update(parent_id=99),
                              "messages[3].parent_id 99 is not the id of any message of the document"),
    "a first message with a parent": (lambda d: _msgs(d)[0].update(parent_id=40),
                                      "messages[0].parent_id 40 is the id of messages[3], written after it"),
    "an id twice": (lambda d: _msgs(d)[3].update(id=20),
                    "messages[3].id 20 is the id of messages[1] already"),
    "no id": (lambda d: _msgs(d)[2].pop("id"), "messages[2] has no 'id'"),
    "an id as text": (lambda d: _msgs(d)[2].update(id="30"), "messages[2].id should be int, not str"),
    "an id true": (lambda d: _msgs(d)[0].update(id=True), "messages[0].id should be int, not bool"),
    "no parent_id": (lambda d: _msgs(d)[1].pop("parent_id"), "messages[1] has no 'parent_id'"),
    "a parent as a float": (lambda d: _msgs(d)[1].update(parent_id=10.0),
                            "messages[1].parent_id should be int, not float"),
    "a parent as a list": (lambda d: _msgs(d)[1].update(parent_id=[10]),
                           "messages[1].parent_id should be int, not list"),
    "a huge parent": (lambda d: _msgs(d)[1].update(parent_id=10**30),
                      "messages[1].parent_id (a huge number) is not the id of any message"),
    "a leaf from nowhere": (lambda d: d["conversation"].update(active_leaf=5),
                            "conversation.active_leaf 5 is not the id of any message of the document"),
    "a leaf as text": (lambda d: d["conversation"].update(active_leaf="40"),
                       "conversation.active_leaf should be int, not str"),
    "edited as text": (lambda d: _msgs(d)[3].update(edited="yes"),
                       "messages[3].edited should be bool, not str"),
}


@pytest.mark.parametrize("how", list(BAD_TREES))
def test_a_document_that_is_not_a_tree_is_one_line_naming_where_and_writes_nothing(tmp_path, how):
    change, why = BAD_TREES[how]
    doc = _doc()
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), "utf-8")
    with Store.open() as s:
        before = row_counts(s.path)
        with pytest.raises(TranscriptError) as exc:
            s.import_conversation(transcript.load(bad))
        assert row_counts(s.path) == before
    msg = str(exc.value)
    assert msg.startswith(str(bad)) and why in msg and "\n" not in msg, msg


def test_the_small_tree_itself_reads_with_its_path_and_a_null_leaf_shows_the_last_message(tmp_path):
    conv = transcript.from_document(_doc())
    assert [m.id for m in conv.messages] == [10, 40] and len(conv.tree) == 4
    doc = _doc()
    doc["conversation"]["active_leaf"] = None
    assert [m.id for m in transcript.from_document(doc).messages] == [10, 40]
    del doc["conversation"]["active_leaf"]
    assert [m.id for m in transcript.from_document(doc).messages] == [10, 40]
    doc["conversation"]["messages"] = []
    empty = transcript.from_document(doc)
    assert (empty.tree, empty.messages, empty.active_leaf) == ([], [], None)


def test_a_version_5_file_is_refused_naming_the_versions_read(tmp_path):
    doc = _doc()
    doc["version"] = 5
    with pytest.raises(transcript._Bad,
                       match="version 5 is a newer version; this LlamaDesk reads versions 1, 2, 3 and 4"):
        transcript.from_document(doc)


# -- generated trees ---------------------------------------------------------------------------

@st.composite
def trees(draw, valid: bool = True):
    """(parents by position, ids, the leaf's position or None): a valid tree, or any parents."""
    n = draw(st.integers(1, 9))
    if valid:
        parents = [draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None for i in range(n)]
    else:
        parents = [draw(st.one_of(st.none(), st.integers(0, n))) for _ in range(n)]  # n: a missing id
    ids = draw(st.lists(st.integers(-(10**12), 10**12), min_size=n + 1, max_size=n + 1, unique=True))
    leaf = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    return parents, ids, leaf


def tree_doc(parents, ids, leaf) -> dict:
    doc = _doc()
    doc["conversation"]["messages"] = [
        {"id": ids[i], "parent_id": None if p is None else ids[p], "role": ("user", "assistant")[i % 2],
         "content": f"message {i}", "created_at": 1733040000.0 + i, "state": "complete",
         "stats": stats(i).to_json() if i % 2 else None}
        for i, p in enumerate(parents)]
    doc["conversation"]["active_leaf"] = None if leaf is None else ids[leaf]
    return doc


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(t=trees())
def test_any_tree_comes_back_with_its_shape_and_path(t):
    parents, ids, leaf = t
    conv = transcript.from_document(tree_doc(parents, ids, leaf))
    assert shape(conv) == parents
    with Store.open() as s:
        back = s.get_conversation(s.import_conversation(conv))
    assert shape(back) == parents
    end = len(parents) - 1 if leaf is None else leaf
    path, at = [], end
    while at is not None:
        path.insert(0, at)
        at = parents[at]
    where = {m.id: i for i, m in enumerate(back.tree)}
    assert [where[m.id] for m in back.messages] == path
    assert [m.stats for m in back.tree] == [m.stats for m in conv.tree]
    assert by_position(transcript.to_document(back)) == by_position(transcript.to_document(conv))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(t=trees(valid=False))
def test_any_parents_read_as_a_tree_only_when_each_follows_an_earlier_message(t):
    parents, ids, leaf = t
    first_bad = next((i for i, p in enumerate(parents) if p is not None and not p < i), None)
    try:
        conv = transcript.from_document(tree_doc(parents, ids, leaf))
    except transcript._Bad as e:
        assert first_bad is not None, e
        assert str(e).startswith(f"messages[{first_bad}].parent_id ") and "\n" not in str(e)
        return
    assert first_bad is None
    assert shape(conv) == parents


# -- a tree the database bent ----------------------------------------------------------------

def test_a_loop_or_a_lost_parent_in_the_database_still_exports_a_file_that_reads_back(tmp_path):
    with Store.open() as s:
        cid = branched(s)
        ids = [m.id for m in s.get_conversation(cid).tree]
    conn = sqlite3.connect(default_path())  # by hand, as a user's sqlite3 session would
    with conn:
        # a loop: 0 -> 3 -> 2 -> 1 -> 0, and a parent that is gone
        conn.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (ids[3], ids[0]))
        conn.execute("UPDATE messages SET parent_id = 999999 WHERE id = ?", (ids[10],))
    conn.close()
    with Store.open() as s:
        conv = s.get_conversation(cid)
        path = export.export(conv, tmp_path / "bent.json")
        back = s.get_conversation(s.import_conversation(transcript.load(path)))
        for fmt in export.FORMATS:
            assert export.render(back, fmt) and export.render(conv, fmt)
    assert sorted(m.content for m in back.tree) == sorted(m.content for m in conv.tree)
