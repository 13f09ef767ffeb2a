"""The turns that used to mislead: stopped before any token, shown all at once, after a reload,
across New chat, in progress; and a conversation another process saved."""

from __future__ import annotations

from dataclasses import replace as replace_config

from app.history import transcript
from app.history.store import Store
from tests.ui.conftest import ask, decode_to_max_tokens, small_config

LONG = "Please remember this sentence about lighthouses and the sea. " * 40


def test_esc_before_the_first_token_leaves_no_ghost_chat_and_no_decode(qtbot, make_window):
    win = make_window(small_config(max_tokens=24))
    before = set(win.history_panel.ids())
    win.composer.set_text(LONG)
    with qtbot.waitSignal(win.flow.reply_failed, timeout=60_000):
        win.flow.send()
        assert win.history_panel.ids(), "listed with its question while it runs"
        win.flow.stop()
    assert win.flow.conversation.id is None and win.flow.conversation.messages == []
    assert set(win.history_panel.ids()) == before  # no "… 2 messages" row that cannot be opened
    assert win.composer.text().startswith("Please remember")  # the question is back in the box
    turns = win.flow.gauges.turns
    assert len(turns) == 1 and turns[0].decode_s == 0.0  # never green "decode (0 tok)"
    assert win.gauges.decode.text() == "–"
    ask(qtbot, win, "Say hi.")  # and the chat goes on, in a conversation of its own
    assert win.flow.conversation.id in win.history_panel.ids()


def test_streaming_off_names_the_first_token_and_when_the_reply_was_shown(qtbot, make_window):
    win = make_window(small_config(streaming=False, max_tokens=16))
    st = ask(qtbot, win, "Name three colours.").stats
    g = win.gauges
    assert g.ttft.caption.text() == "First token" and g.ttft.text() == str(st.ttft())
    assert f"first token at {st.ttft()}" in g.note.text()
    assert f"the reply shown at {st.total()}" in g.note.text()


def test_a_reload_shows_the_new_context_and_new_chat_empties_the_timeline(qtbot, make_window):
    win = make_window(small_config(n_ctx=1024, max_tokens=8))
    ask(qtbot, win, "Name three colours.")
    assert "/1024 tokens" in win.gauges.kv_text.text()
    win.apply_settings(replace_config(win.config, n_ctx=2048))
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.load_model(win.model_path)
    text = win.gauges.kv_text.text()
    assert "/2048 tokens" in text and "1024" not in text
    assert len(win.flow.gauges.turns) == 1  # the conversation's timeline stays
    first = win.flow.conversation.id
    win.new_chat()
    assert win.flow.gauges.turns == [] and win.gauges.timeline_box.currentWidget() is not win.gauges.timeline
    ask(qtbot, win, "Say hi.")
    assert win.gauges.turn_text.text().startswith("#1:")  # numbered in this conversation
    assert win.history.open(first)
    assert len(win.flow.gauges.turns) == 1  # rebuilt from the stored stats
    assert win.gauges.turn_text.text().startswith("#1:")


def test_the_timeline_draws_the_reply_in_progress(qtbot, make_window):
    win = make_window(small_config(max_tokens=8))
    ask(qtbot, win, "Name three colours.")
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    win.config.max_tokens = 120
    t = win.gauges.timeline
    win.composer.set_text("Tell me a story about the sea.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000):
        win.flow.send()
        qtbot.waitUntil(lambda: win.flow.gauges.generated >= 10, timeout=60_000)
        qtbot.wait(250)
        widths = list(t.bars["decode"].opts["width"])
        front = len(t.now.data)
    assert len(widths) == 2 and widths[-1] > 0  # the second bar, growing
    assert front == 1  # with a mark where it has got to
    assert len(t.now.data) == 0 and len(t.bars["decode"].opts["width"]) == 2


def test_a_conversation_imported_from_the_command_line_appears_without_a_search(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    with Store.open() as s:  # what `llamadesk import` does, from another connection
        cid = s.create_conversation()
        s.add_message(cid, "user", "Imported elsewhere")
        s.add_message(cid, "assistant", "Yes.")
        path = tmp_path / "t.json"
        path.write_text(transcript.dumps(s.get_conversation(cid)), encoding="utf-8")
        other = s.import_conversation(transcript.load(path))
    qtbot.waitUntil(lambda: other in win.history_panel.ids() and cid in win.history_panel.ids(),
                    timeout=5_000)
    assert win.history_panel.query() == ""
