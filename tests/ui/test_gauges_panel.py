"""The gauges as a user reads them: big numbers with units, the ceiling, the timeline, both palettes."""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QPalette

from app.chat.live_gauges import turn_from
from tests.ui.conftest import ask, decode_to_max_tokens, reply_stats, small_config


def test_a_turn_is_split_at_the_engines_prefill_start_or_else_by_its_prefill_time():
    split = dict(ttft_s=0.5, prefill_s=0.3, total_s=1.6)  # 0.5 s to the first token, 1.6 s in all
    t = turn_from(reply_stats(**split), prefill_began=0.1)
    assert (round(t.wait_s, 6), round(t.prefill_s, 6), round(t.decode_s, 6)) == (0.1, 0.4, 1.1)
    assert abs(t.total_s - 1.6) < 1e-9
    # A server says no prefill start, only its prefill time.
    remote = turn_from(reply_stats(**split, source="llama-server at x"), prefill_began=None)
    assert (round(remote.wait_s, 6), round(remote.prefill_s, 6)) == (0.2, 0.3)
    # No text (stopped before the first token): no decode at all, never 1.6 s of green "decode (0 tok)".
    unknown = turn_from(reply_stats(total_s=1.6, prefill_s=None, ttft_s=None), prefill_began=None)
    assert unknown.decode_s == 0.0 and unknown.wait_s == 1.6 and unknown.total_s == 1.6
    stopped = turn_from(reply_stats(total_s=1.6, prefill_s=0.2, ttft_s=None), prefill_began=0.1)
    assert (stopped.wait_s, stopped.decode_s) == (0.1, 0.0) and abs(stopped.prefill_s - 1.5) < 1e-9


def test_mid_reply_the_panel_shows_live_numbers_the_ceiling_and_the_timeline(qtbot, make_window):
    win = make_window(small_config(max_tokens=24))
    first = ask(qtbot, win, "Name three colours.")
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    win.config.max_tokens = 160
    g = win.gauges
    win.composer.set_text("Tell me a long story about the sea.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: win.flow.gauges.generated >= 30, timeout=60_000)
        qtbot.wait(400)
        mid = {"decode": g.decode.text(), "caption": g.decode.caption.text(), "ttft": g.ttft.text(),
               "points": len(g.plot.curve.xData if g.plot.curve.xData is not None else []),
               "ceiling": g.plot.ceiling_line.value(),
               "ceiling_shown": g.plot.ceiling_line.isVisible(), "bar": g.ceiling_bar.rate,
               "bar_ceiling": g.ceiling_bar.ceiling}
    second = done.args[0]
    assert re.fullmatch(r"\d+\.\d tok/s", mid["decode"]) and mid["caption"] == "Decode (live)"
    assert re.fullmatch(r"\d+ ms", mid["ttft"])
    assert mid["points"] >= 2, "the live decode curve has points mid-reply"
    # The chart is drawn every other refresh while a reply runs: its ceiling may be one refresh
    # (a few more KV cells) behind the bar's.
    assert mid["ceiling_shown"] and abs(mid["ceiling"] - mid["bar_ceiling"]) < 0.02 * mid["bar_ceiling"]
    assert mid["bar"] > 0
    qtbot.waitUntil(lambda: g.decode.caption.text() == "Decode", timeout=5_000)
    assert g.decode.text() == f"{second.stats.decode_tok_s:.1f} tok/s" == str(second.stats.decode())
    assert g.prefill.text() == str(second.stats.prefill())  # a rate, or a short prompt's time
    # The timeline: one bar per turn, its segments adding up to what each reply took.
    bars = g.timeline.bars
    widths = [[bars[k].opts["width"][i] for k in ("wait", "prefill", "decode")] for i in range(2)]
    for w, msg in zip(widths, (first, second)):
        assert abs(sum(w) - msg.stats.total_s) < 0.05 * msg.stats.total_s + 0.02
        assert abs(w[0] + w[1] - msg.stats.ttft_s) < 0.02 + 0.05 * msg.stats.ttft_s
    assert second.stats.cached_tokens > 0 and len(g.timeline.cached.data) == 1  # the second reused a prefix
    assert f"{second.stats.cached_tokens} cached" in g.turn_text.text()
    assert "GFLOP/s" in g.peak.text()


def test_the_charts_follow_a_dark_palette(qtbot, make_window):
    win = make_window(small_config())
    pal = QPalette(win.palette())
    pal.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e"))
    pal.setColor(QPalette.ColorRole.Text, QColor("#e0e0e0"))
    win.setPalette(pal)
    for chart in (win.gauges.plot, win.gauges.timeline):
        qtbot.waitUntil(lambda c=chart: c.backgroundBrush().color().name() == "#1e1e1e", timeout=2_000)
        assert chart.getAxis("left").textPen().color().name() == "#e0e0e0"


def test_the_ceiling_label_follows_a_value_set_while_the_line_was_hidden(qtbot):
    from app.ui.widgets.charts import LineChart

    chart = LineChart("tok/s", "s")
    qtbot.addWidget(chart)
    chart.show()
    chart.set_data([], None)  # hidden, as before the first reply
    chart.set_data([(0.0, 80.0), (1.0, 90.0)], 97.4)
    assert chart.ceiling_line.label.toPlainText() == "ceiling 97"
    chart.set_data([(0.0, 80.0)], None)
    chart.set_data([(0.0, 80.0), (2.0, 140.0)], 147.0)
    assert chart.ceiling_line.label.toPlainText() == "ceiling 147"


def test_while_a_reply_runs_the_charts_take_turns_and_a_loaded_model_leaves_gc_settled(qtbot, make_window):
    """One paint pass drawing both charts, and a full collection mid-reply, were the GUI thread's
    longest stalls (`bench --gui`): the charts alternate while a reply runs, both when it ends, and
    what the loaded window holds is out of later full collections."""
    import gc

    win = make_window(small_config(max_tokens=48))
    assert gc.get_freeze_count() > 0, "the load collected and froze what the window holds"
    g = win.gauges
    calls, active = [], {}
    set_data, set_turns, show = g.plot.set_data, g.timeline.set_turns, g.show_snapshot
    g.plot.set_data = lambda *a: (calls.append(("plot", g.updates)), set_data(*a))
    g.timeline.set_turns = lambda *a: (calls.append(("timeline", g.updates)), set_turns(*a))
    g.show_snapshot = lambda snap: (active.__setitem__(g.updates + 1, snap.active), show(snap))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    ask(qtbot, win, "Tell me about the moon.")
    live = [(name, n) for name, n in calls if active[n]]
    assert len(live) >= 4
    assert {n % 2 for name, n in live if name == "plot"} == {0}
    assert {n % 2 for name, n in live if name == "timeline"} == {1}
    ended = [n for n, on in active.items() if not on and n > min(n for _, n in live)]
    assert ended and {("plot", ended[0]), ("timeline", ended[0])} <= set(calls), "a finished reply draws both"
