"""The rule: a figure shown in two places is one number, formatted once.

The gauges' tiles, the footer under the reply, the timeline's line, the
bandwidth bar and the line under it, the exports and the JSON record that
`ask --json` prints all show a reply's TTFT, prefill, decode, KV and total.
Each is read here off the real widgets after a real reply and compared with
ReplyStats' own formatting, which the footer is made of.
"""

from __future__ import annotations

import json

from app.engine.stats import ReplyStats
from app.history import export
from tests.ui.conftest import ask, small_config


def test_every_figure_shown_twice_is_the_same_number(qtbot, make_window, tmp_path):
    win = make_window(small_config(max_tokens=24))
    ask(qtbot, win, "Name three colours.")
    msg = ask(qtbot, win, "And three animals?")  # a cached prefix this time
    st = msg.stats
    g = win.gauges
    qtbot.waitUntil(lambda: g.decode.caption.text() == "Decode", timeout=5_000)
    footer = st.summary()
    assert footer in win.view.toPlainText()
    # Tiles == the footer's own figures.
    for tile, fig in ((g.ttft, st.ttft()), (g.prefill, st.prefill()), (g.decode, st.decode())):
        assert fig is not None and tile.text() == str(fig) and str(fig) in footer
    # The KV gauge counts what the cache holds, as the footer does (not one more).
    assert f"KV {st.kv()}" in footer and f"{st.kv()} tokens" in g.kv_text.text()
    assert g.kv_bar.cached + g.kv_bar.new + g.kv_bar.generated == st.kv_used
    # The timeline: the turn's line and its bar say the footer's TTFT and total.
    assert f"TTFT {st.ttft()}" in g.turn_text.text() and f"total {st.total()}" in g.turn_text.text()
    assert g.turn_text.text().startswith("#2:")
    bars = g.timeline.bars
    assert abs(bars["wait"].opts["width"][-1] + bars["prefill"].opts["width"][-1] - st.ttft_s) < 1e-9
    # The bandwidth bar and the line under it: one share of the peak, the record's.
    assert st.bw_utilization is not None and g.ceiling_bar.share == st.bw_utilization
    assert f"{100 * st.bw_utilization:.0f}% of peak" in g.bandwidth.text()
    # The exports: the footer line in each, and the HTML's table in the footer's words.
    conv = win.store.get_conversation(win.flow.conversation.id)
    assert conv.messages[-1].stats == st
    page = export.render(conv, "html")
    assert footer in page and all(f"<td>{text}</td>" in page for _label, text in st.details())
    assert footer in export.render(conv, "md") and footer in export.render(conv, "txt")
    # The JSON record (`ask --json` prints stats.to_json()): its raw numbers are the shown ones.
    record = json.loads(json.dumps(st.to_json()))
    assert ReplyStats.from_json(record).summary() == footer
    assert f"{record['ttft_s'] * 1000:.0f}" == st.ttft().value
    assert f"{record['decode_tok_s']:.1f}" == st.decode().value
    assert record["kv_used"] == st.kv_used
