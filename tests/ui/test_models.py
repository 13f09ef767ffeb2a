"""The window's Qt-free parts: conversation edits, the settings file, Markdown, gauges."""

from __future__ import annotations

from app.chat.conversation import LiveConversation
from app.chat.live_gauges import LiveGauges
from app.engine.events import FirstToken, PrefillStarted, Progress, TextDelta
from app.ui.chat.markdown import MarkdownRenderer
from tests.ui.conftest import reply_stats


def test_take_last_exchange_and_dropped_flags():
    c = LiveConversation()
    c.add("user", "one")
    c.add("assistant", "1", reply_stats())
    c.add("user", "two")
    c.add("assistant", "2", reply_stats())
    assert c.can_regenerate()
    assert [m.content for m in c.history(2)] == ["one", "1"]
    assert c.mark_dropped([0, 1]) == [0, 1]
    assert c.mark_dropped([0, 1]) == []
    text, removed = c.take_last_exchange()
    assert text == "two" and [m.content for m in removed] == ["two", "2"]
    assert [m.content for m in c.messages] == ["one", "1"]
    assert c.title == "one"


def test_reopened_conversation_shows_what_the_store_kept():
    from app.history.records import INTERRUPTED
    from app.history.store import Store

    with Store.open() as store:
        cid = store.create_conversation(system_prompt="Be brief.")
        store.add_message(cid, "user", "one")
        store.add_message(cid, "assistant", "1", stats=reply_stats())
        store.add_message(cid, "user", "two")
        cut = store.begin_reply(cid)
        store.finish_reply(cut, "par", None, state=INTERRUPTED)
        store.add_message(cid, "user", "three")
        store.finish_reply(store.begin_reply(cid), "", None, state=INTERRUPTED)  # nothing to show
        back = LiveConversation.from_store(store.get_conversation(cid))
    assert [(m.content, m.state) for m in back.messages] == \
           [("one", "complete"), ("1", "complete"), ("two", "complete"), ("par", INTERRUPTED),
            ("three", "complete")]
    assert back.messages[1].stats == reply_stats() and back.system_prompt == "Be brief." and back.id == cid


def test_markdown_renders_code_with_copy_links_and_escapes_html():
    r = MarkdownRenderer().render("# T\n\n<script>x</script>\n\n```python\nprint('hi')\n```\n\n"
                                  "| a | b |\n|---|---|\n| 1 | 2 |\n", copy_base=3)
    assert r.code_blocks == ["print('hi')\n"]
    assert 'href="copy:3"' in r.html
    assert "<script>" not in r.html
    assert "<table" in r.html and "<h1>" in r.html and "color" in r.html


def test_live_gauges_count_ttft_while_waiting_and_split_the_kv_bar():
    g = LiveGauges()
    g.start(100.0, max_tokens=50, n_ctx=512)
    s = g.snapshot(100.5)
    assert s.ttft_s == 0.5 and not s.ttft_final and s.phase == "waiting"
    g.feed(PrefillStarted(prompt_tokens=30, cached_tokens=20, new_tokens=10, n_ctx=512), 100.6)
    g.feed(FirstToken(0.7), 100.7)
    for i in range(1, 11):
        g.feed(TextDelta("x", i, 100.7 + i * 0.01), 100.7 + i * 0.01)
    g.feed(Progress("decode", 0.8, 10, 10, 95.0, 40, 512), 100.8)
    s = g.snapshot(100.81)
    assert s.ttft_s == 0.7 and s.ttft_final
    assert round(s.rate_tok_s) == 100
    # The 10th token is sampled, not yet fed back: the cache holds 9 of them (as ReplyStats.kv_used says).
    assert (s.kv_cached, s.kv_new, s.kv_generated, s.kv_used) == (20, 10, 9, 39)
    assert abs(s.remaining_s - 40 / s.rate_tok_s) < 1e-6
    g.finish(reply_stats(ttft_s=0.7, decode_tokens=10), 101.0)
    s = g.snapshot(105.0)
    assert not s.active and s.elapsed_s == 1.0 and s.decode_tok_s == 100.0
    assert [(t.ttft_s, t.decode_tok_s, t.cached) for t in s.turns] == [(0.7, 100.0, 5)]
