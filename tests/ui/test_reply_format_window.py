"""The reply format in the real window: the chooser and its schema dialog, a turn held to a
schema on the real model, the JSON reply drawn as a JSON code block, and the format saved with
the conversation and restored when it is opened again (real SQLite under the test's XDG dir)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from PySide6.QtWidgets import QDialogButtonBox

from app.chat.live_gauges import turn_from
from app.chat.reply_format import ANY_JSON, SCHEMA, TEXT, ReplyFormat, schema_format
from app.engine import vocabulary
from app.engine.events import Preparing
from app.engine.stats import ReplyStats
from app.history.records import JSON_REPLY
from app.history.store import Store
from app.ui.chat.gauges import turn_line, turn_tip
from app.ui.chat.reply_format import SCHEMA_ITEM, ReplyFormatChooser
from tests.ui.conftest import ask, small_config

CITY = {"title": "City", "type": "object", "additionalProperties": False, "required": ["name", "country"],
        "properties": {"name": {"type": "string", "maxLength": 16},
                       "country": {"type": "string", "maxLength": 16}}}
UNENFORCEABLE = '{"type": "array",\n "uniqueItems": true}'


def ok_button(dlg):
    return dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)


def test_a_schema_that_cannot_be_enforced_is_said_in_one_line_and_nothing_is_lost(qtbot, tmp_path):
    chooser = ReplyFormatChooser()
    qtbot.addWidget(chooser)
    chooser.show()
    picked = []
    chooser.chosen.connect(picked.append)
    chooser.combo.setCurrentIndex(2)
    chooser.combo.activated.emit(2)  # "Schema…", as a click picks it
    dlg = chooser.dialog
    assert dlg is not None and dlg.isVisible()
    dlg.edit.setPlainText(UNENFORCEABLE)
    ok_button(dlg).click()
    assert dlg.isVisible(), "the dialog stays open on an error"
    line = dlg.error.full_text()
    assert "uniqueItems" in line and "\n" not in dlg.error.text() and dlg.error.isVisible()
    assert dlg.error.sizeHint().height() < 2.5 * dlg.error.fontMetrics().height()
    assert dlg.edit.toPlainText() == UNENFORCEABLE, "the text is kept to be fixed"
    assert picked == [] and chooser.format == ReplyFormat() and chooser.combo.currentText() == "Text"

    bad = tmp_path / "latin.json"
    bad.write_bytes(b'{"title": "caf\xe9"}')
    assert not dlg.load_file(bad)
    assert "latin.json: not UTF-8" in dlg.error.full_text() and dlg.edit.toPlainText() == UNENFORCEABLE

    good = tmp_path / "city.json"
    good.write_text(json.dumps(CITY, indent=2))
    assert dlg.load_file(good) and not dlg.error.isVisible()
    ok_button(dlg).click()
    assert not dlg.isVisible()
    assert [f.mode for f in picked] == [SCHEMA] and picked[0].name == "city.json"
    assert chooser.combo.currentText() == "Schema: city.json"

    chooser.combo.activated.emit(2)  # picked again: the schema in use, to edit
    assert json.loads(chooser.dialog.edit.toPlainText()) == CITY
    chooser.dialog.reject()
    assert chooser.format.mode == SCHEMA and len(picked) == 1, "Cancel leaves the format as it was"
    chooser.combo.setCurrentIndex(0)
    chooser.combo.activated.emit(0)
    assert picked[-1] == ReplyFormat() and chooser.combo.itemText(2) == SCHEMA_ITEM


def test_a_turn_held_to_a_schema_is_valid_json_drawn_as_json_and_restored_on_reopening(qtbot, make_window):
    win = make_window(small_config(max_tokens=40))
    win.reply_format.choose(schema_format(json.dumps(CITY), "city.json"))
    opened_code, grammar_lines = [], []
    live_append = win.view.live_append
    win.view.live_append = lambda text: (live_append(text), opened_code.append(win.view.in_open_code))
    show = win.gauges.show_snapshot
    win.gauges.show_snapshot = lambda s: (show(s), grammar_lines.append((s.active, s.phase,
                                                                         win.gauges.grammar.text())))
    msg = ask(qtbot, win, "Name a city in Spain.")
    got = json.loads(msg.content)
    jsonschema.validate(got, CITY)
    assert msg.format == JSON_REPLY and msg.stats.grammar_ms_per_token is not None
    assert opened_code and all(opened_code), "the reply streamed into its JSON code box"
    assert all(line for active, _p, line in grammar_lines if active), "the grammar's line from Send on"
    if msg.stats.decode_s > 0.5:  # long enough for the decode's Progress events
        assert any(active and phase == "decode" and ("µs/tok" in line or "ms/tok" in line)
                   for active, phase, line in grammar_lines), "its cost per token, live"
    assert win.gauges.grammar.text().startswith(f"Grammar {msg.stats.grammar()} · ")  # the footer's
    assert f"grammar {msg.stats.grammar()}" in win.view.toPlainText()
    shown = win.view.toPlainText()
    assert "json  Copy" in shown.replace("\xa0", " ")
    assert json.dumps(got, ensure_ascii=False, indent=2).splitlines()[1] in shown  # pretty-printed
    cid = win.flow.conversation.id
    with Store.open() as s:
        conv = s.get_conversation(cid)
    assert conv.reply_format["mode"] == SCHEMA and conv.messages[1].format == JSON_REPLY

    win.new_chat()
    assert win.reply_format.combo.currentText() == "Text" and win.flow.turn_settings().constraint is None
    win.history.open(cid)
    assert win.reply_format.combo.currentText() == "Schema: city.json"
    assert win.flow.turn_settings().constraint == schema_format(json.dumps(CITY)).constraint()
    assert "json" in win.view.toPlainText()  # the reopened reply is still drawn as JSON

    win.reply_format.choose(ReplyFormat(ANY_JSON))  # chosen between turns: saved at once
    with Store.open() as s:
        assert s.get_conversation(cid).reply_format == {"mode": ANY_JSON}
    win.close()

    again = make_window()  # a new window on the same history: the format comes back with it
    again.history.open(cid)
    assert again.reply_format.format.mode == ANY_JSON and again.reply_format.combo.currentText() == "Any JSON"
    reply = ask(qtbot, again, "Describe Madrid in one object.")
    assert isinstance(json.loads(reply.content), dict) and reply.format == JSON_REPLY
    again.reply_format.choose(ReplyFormat(TEXT))
    assert again.flow.turn_settings().constraint is None

    with Store.open() as s:  # a stored schema this LlamaDesk cannot enforce (a hand edit, an older one)
        s.set_reply_format(cid, {"mode": SCHEMA, "schema": UNENFORCEABLE, "name": "odd.json"})
    again.new_chat()
    again.history.open(cid)
    assert "reply format cannot be used" in again.bar.text() and "uniqueItems" in again.bar.text()
    assert again.reply_format.combo.currentText() == "Text" and again.flow.turn_settings().constraint is None


def test_choosing_a_format_indexes_the_vocabulary_before_the_first_reply_needs_it(qtbot, make_window):
    win = make_window(small_config(max_tokens=8))
    vocab = win.bridge.worker.engine.decoder.vocab
    assert not vocabulary.ready(vocab), "a free-text window builds nothing it may never use"
    win.reply_format.choose(ReplyFormat(ANY_JSON))
    qtbot.waitUntil(lambda: vocabulary.ready(vocab), timeout=30_000)
    events = []
    win.bridge.reply_event.connect(lambda _jid, ev: events.append(ev))
    msg = ask(qtbot, win, "Describe Lisbon in one object.")
    assert msg.stats.grammar_setup_s is not None and not any(isinstance(e, Preparing) for e in events)
    assert "format setup" not in win.view.toPlainText(), "nothing to explain in the footer"


def _stats(setup: float | None) -> ReplyStats:
    return ReplyStats(ttft_s=2.4, prefill_tokens=40, cached_tokens=0, prefill_s=0.3, prefill_tok_s=133.0,
                      decode_tokens=5, decode_s=0.1, decode_tok_s=40.0, total_s=2.5, kv_used=45, n_ctx=512,
                      stop_reason="stop", decode_sampled=4, grammar_setup_s=setup)


def test_the_setup_is_named_on_the_timeline_the_footer_and_the_export_rows():
    st = _stats(1.9)
    turn = turn_from(st, prefill_began=2.0)
    assert turn.setup_s == pytest.approx(1.9) and turn.setup_s <= turn.wait_s
    assert "format setup 1900 ms" in turn_line(1, turn) and "(format setup 1900 ms)" in turn_tip(turn)
    assert "TTFT 2400 ms (format setup 1900 ms)" in st.summary()
    assert ("format setup", "1900 ms") in st.details()
    assert ReplyStats.from_json(st.to_json()).grammar_setup_s == pytest.approx(1.9)

    quick = _stats(0.004)  # a compile on an indexed model: not worth a word in the footer
    assert "format setup" not in quick.summary() and "format setup" not in turn_line(1, turn_from(quick, 0.1))
    assert ("format setup", "4 ms") in quick.details()
