"""Search and a reply's reasoning: answers only by default, the reasoning too when asked, alike on
the trigram index and on the LIKE fallback, kept in step as a reply streams, is regenerated and is
deleted; and `llamadesk list --search TEXT --reasoning`. Real SQLite, the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.history.store import Store
from tests.history.test_reasoning_store import check_index

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["fts", "like"])
def store(request):
    s = Store.open()
    if request.param == "fts" and not s.fts:
        s.close()
        pytest.skip("this SQLite has no FTS5 trigram tokenizer")
    s.fts = request.param == "fts"  # the LIKE path is what a SQLite without FTS5 searches with
    yield s
    s.close()


def seeded(s: Store) -> dict[str, int]:
    """Three replies: thinking about zebras answering about horses, the other way round, and a
    reply without reasoning."""
    ids = {}
    for key, q, answer, thought in (
            ("horse", "striped animals?", "Horses are not striped.", "Zebras have stripes; horses do not."),
            ("zebra", "what has stripes?", "A zebra.", "Stripes: tigers, zebras, maybe horses."),
            ("plain", "hello", "Hello, zebra fan!", "")):
        _c, _q, r = s.begin_turn(None, q)
        s.finish_reply(r, answer, None, reasoning=thought)
        ids[key] = r
    return ids


def test_answers_only_by_default_and_reasoning_when_asked(store):
    ids = seeded(store)
    assert {h.message_id for h in store.search("zebra")} == {ids["zebra"], ids["plain"]}
    assert all(not h.in_reasoning for h in store.search("zebra"))
    assert {h.message_id for h in store.search("horse")} == {ids["horse"]}

    wide = {h.message_id: h for h in store.search("zebra", include_reasoning=True)}
    assert set(wide) == {ids["horse"], ids["zebra"], ids["plain"]}
    assert wide[ids["horse"]].in_reasoning  # only its thinking says zebra
    assert wide[ids["horse"]].snippet == "Zebras have stripes; horses do not."
    assert not wide[ids["zebra"]].in_reasoning and wide[ids["zebra"]].snippet == "A zebra."
    assert not wide[ids["plain"]].in_reasoning
    assert {h.message_id for h in store.search("HORSES", include_reasoning=True)} == \
           {ids["horse"], ids["zebra"]}


def test_two_letter_queries_search_the_reasoning_too_when_asked(store):
    """Under three characters the index has no trigram: both paths fall back to LIKE."""
    _c, _q, r = store.begin_turn(None, "short")
    store.finish_reply(r, "ok", None, reasoning="maybe Qx")
    assert store.search("qx") == []
    assert [h.message_id for h in store.search("qx", include_reasoning=True)] == [r]


def test_the_index_follows_the_reasoning_as_it_streams_and_is_deleted(store):
    cid, _q, r = store.begin_turn(None, "think")
    store.update_reply(r, "", "first idea: aardvark")
    assert [h.message_id for h in store.search("aardvark", include_reasoning=True)] == [r]
    store.update_reply(r, "", "second idea: pangolin")
    assert store.search("aardvark", include_reasoning=True) == []
    store.finish_reply(r, "Pangolins.", None)
    assert [h.message_id for h in store.search("second idea", include_reasoning=True)] == [r]
    store.delete_branch(cid, r)
    assert store.search("pangolin", include_reasoning=True) == []
    if store.fts:
        check_index(store)


def test_a_deleted_conversations_reasoning_is_not_found(store):
    ids = seeded(store)
    conv = next(c.id for c in store.list_conversations()
                if ids["horse"] in {m.id for m in store.get_conversation(c.id).tree})
    store.delete_conversation(conv)
    assert ids["horse"] not in {h.message_id for h in store.search("zebras have", include_reasoning=True)}


def llamadesk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_list_search_with_reasoning_on_the_command_line():
    with Store.open() as s:
        cid_a, _q, r = s.begin_turn(None, "first")
        s.finish_reply(r, "An answer.", None, reasoning="thinking of okapis")
        cid_b, _q, r = s.begin_turn(None, "second")
        s.finish_reply(r, "Okapis live in the Congo.", None)

    def ids(*args: str) -> list[int]:
        out = llamadesk("list", "--json", *args)
        assert out.returncode == 0, out.stderr
        return sorted(c["id"] for c in json.loads(out.stdout))

    assert ids("--search", "okapi") == [cid_b]
    assert ids("--search", "okapi", "--reasoning") == sorted([cid_a, cid_b])
    bad = llamadesk("list", "--reasoning")
    assert bad.returncode == 2 and bad.stderr.strip() == \
           "llamadesk: error: --reasoning widens a search: give --search TEXT with it"
    bad = llamadesk("list", str(cid_a), "--reasoning")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--reasoning" in bad.stderr
