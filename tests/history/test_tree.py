"""Conversations as trees in the store (schema v5): every earlier file migrates to a line of
parents in one step, an edited question or a regenerated reply starts a branch beside the old one,
the path shown follows a switch, a branch is deleted alone, a path forks into a new conversation,
and search finds text on every branch. Real SQLite under the test's XDG data dir."""

from __future__ import annotations

import sqlite3

import pytest

from app.history import migrations
from app.history.errors import ConversationNotFound
from app.history.records import COMPLETE
from app.history.store import Store, default_path


def five_turns(s: Store) -> tuple[int, list[int]]:
    """A conversation of five exchanges; the ids, question then reply, in order."""
    cid, ids = None, []
    for n in range(1, 6):
        cid, q, r = s.begin_turn(cid, f"question {n}")
        s.finish_reply(r, f"answer {n}", None)
        ids += [q, r]
    return cid, ids


def shown(s: Store, cid: int) -> list[str]:
    return [m.content for m in s.get_conversation(cid).messages]


def test_a_v4_file_migrates_to_a_line_of_parents_with_ids_search_and_its_last_message_shown():
    path = default_path()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    migrations.migrate(conn, target=4)
    migrations.ensure_search_index(conn, migrations.fts_available())
    for title in ("first", "second"):
        conn.execute("INSERT INTO conversations (title, created_at, updated_at, settings) "
                     "VALUES (?, 1.0, 2.0, '{}')", (title,))
    rows = [(1, "user", "alpha question"), (2, "user", "other chat"), (1, "assistant", "alpha answer"),
            (1, "user", "beta question"), (2, "assistant", "other answer"), (1, "assistant", "beta answer")]
    for cid, role, text in rows:
        conn.execute("INSERT INTO messages (conversation_id, role, content, created_at, updated_at, state) "
                     "VALUES (?, ?, ?, 1.0, 1.0, 'complete')", (cid, role, text))
    conn.execute("COMMIT")
    conn.close()

    with Store.open() as s:
        one, two = s.get_conversation(1), s.get_conversation(2)
        assert [(m.id, m.parent_id) for m in one.messages] == [(1, None), (3, 1), (4, 3), (6, 4)]
        assert [(m.id, m.parent_id) for m in two.messages] == [(2, None), (5, 2)]
        assert one.active_leaf == 6 and two.active_leaf == 5 and one.tree == one.messages
        if s.fts:
            assert sorted(h.message_id for h in s.search("beta")) == [4, 6]
        _c, _q, _r = s.begin_turn(1, "gamma question")
        assert s.get_conversation(1).messages[-2].parent_id == 6, "a turn follows the path shown"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.CURRENT >= 5
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_editing_the_second_question_branches_and_both_branches_keep_their_answers():
    with Store.open() as s:
        cid, ids = five_turns(s)
        q2, a1 = ids[2], ids[1]
        _c, q2b, r2b = s.begin_turn(cid, "question 2, edited", parent_id=a1)
        s.finish_reply(r2b, "answer 2b", None)
        assert shown(s, cid) == ["question 1", "answer 1", "question 2, edited", "answer 2b"]
        conv = s.get_conversation(cid)
        assert conv.alternatives(conv.messages[2]) == [q2, q2b] and len(conv.tree) == 12

        s.show_branch(cid, q2)  # back: the old branch whole, down to its last answer
        assert shown(s, cid) == [f"{w} {n}" for n in range(1, 6) for w in ("question", "answer")]
        s.show_branch(cid, q2b)
        assert shown(s, cid)[-1] == "answer 2b"
        with pytest.raises(ConversationNotFound):
            s.show_branch(cid, 10_000)


def test_regenerating_keeps_the_earlier_replies_as_siblings_under_one_question():
    with Store.open() as s:
        cid, ids = five_turns(s)
        q5, a5 = ids[8], ids[9]
        for text in ("answer 5b", "answer 5c"):
            r = s.begin_reply(cid, parent_id=q5)
            s.finish_reply(r, text, None)
        conv = s.get_conversation(cid)
        assert conv.messages[-1].content == "answer 5c" and conv.messages[-2].id == q5
        versions = conv.alternatives(conv.messages[-1])
        assert versions[0] == a5 and len(versions) == 3
        s.show_branch(cid, a5)
        assert shown(s, cid)[-1] == "answer 5"


def test_deleting_a_branch_takes_only_it_and_what_follows_and_the_path_moves_beside_it():
    with Store.open() as s:
        cid, ids = five_turns(s)
        _c, q2b, r2b = s.begin_turn(cid, "question 2b", parent_id=ids[1])
        s.finish_reply(r2b, "answer 2b", None)
        assert s.delete_branch(cid, q2b) == 2
        assert shown(s, cid)[-1] == "answer 5" and len(s.get_conversation(cid).tree) == 10
        assert s.delete_branch(cid, ids[6]) == 4  # question 4 and all after it
        assert shown(s, cid) == ["question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3"]
        if s.fts:
            assert s.search("question 4") == [] and s.search("answer 3")


def test_a_failed_regeneration_rolled_back_shows_the_earlier_reply_again():
    with Store.open() as s:
        cid, ids = five_turns(s)
        r = s.begin_reply(cid, parent_id=ids[8])
        s.delete_message(r)
        conv = s.get_conversation(cid)
        assert conv.active_leaf == ids[9] and conv.messages[-1].content == "answer 5"


def test_a_path_forks_into_a_new_conversation_and_search_finds_every_branch():
    with Store.open() as s:
        cid, ids = five_turns(s)
        _c, _q3b, r3b = s.begin_turn(cid, "question 3 on a side branch", parent_id=ids[3])
        s.finish_reply(r3b, "a side answer", None)
        fork = s.fork(cid, ids[5])  # answer 3 of the first branch, not the one shown
        f = s.get_conversation(fork)
        assert [m.content for m in f.messages] == ["question 1", "answer 1", "question 2", "answer 2",
                                                    "question 3", "answer 3"]
        assert f.title.endswith("(fork)") and all(m.state == COMPLETE for m in f.messages)
        assert [m.parent_id for m in f.messages][1:] == [m.id for m in f.messages][:-1]
        assert shown(s, cid)[-1] == "a side answer", "the original is as it was"
        if s.fts:
            hits = {(h.conversation_id, h.message_id) for h in s.search("question 5")}
            assert (cid, ids[8]) in hits, "text on a branch not shown is found"
