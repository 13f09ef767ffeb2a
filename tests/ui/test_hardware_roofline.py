"""The settings' hardware rows name AMX and both roofs; the gauges say both utilizations and
which roof binds. Nothing here measures: the figures come from what a decode left."""

from __future__ import annotations

import pytest

from app.chat import live_gauges
from app.chat.live_gauges import LiveGauges, MeasuredDecode
from app.engine import backend
from app.engine.gguf import read_header
from app.engine.utilization import Limits
from app.ui.chat.gauges import roofs_words
from app.ui.settings.hardware import NOT_YET, hardware_rows
from tests.ui.conftest import reply_stats


@pytest.fixture(scope="module")
def report(model_path):
    from app.engine.loader import LoadOptions, load_model

    m = load_model(model_path, LoadOptions(n_ctx=512, n_threads=1))
    try:
        return m.report
    finally:
        m.close()


def _rows(rows, label):
    return [text for lab, text in rows if lab == label]


def test_the_hardware_rows_show_amx_and_both_roofs_with_the_last_decodes_share(model_path, report):
    lim = Limits(read_header(model_path), "f16", 20e9, "probe (1 threads)", mac_peak=30e9,
                 mac_source="prefill probe: 512 tokens, 1 thread, measured earlier")
    rows = hardware_rows(report, decode=MeasuredDecode(lim, 300, 40.0))
    assert _rows(rows, "AMX") == [backend.amx().line()]
    r = lim.roofs(300, 40.0)
    (mem,) = _rows(rows, "Memory roof")
    (comp,) = _rows(rows, "Compute roof")
    (binds,) = _rows(rows, "Roofline")
    assert f"{r.memory_tok_s:.0f} tok/s" in mem and f"{100 * r.memory_util:.0f}% of it" in mem
    assert f"{r.compute_tok_s:.0f} tok/s" in comp and f"{100 * r.compute_util:.0f}% of it" in comp
    assert binds.startswith(f"{r.binds} binds: ceiling {r.ceiling_tok_s:.0f} tok/s")


def test_before_a_decode_the_roofs_say_not_measured_and_without_a_model_amx_still_shows(report):
    rows = hardware_rows(report, decode=None)
    assert _rows(rows, "Memory roof") == [NOT_YET] and _rows(rows, "Compute roof") == [NOT_YET]
    assert _rows(hardware_rows(None), "AMX") == [backend.amx().line()]
    assert not _rows(hardware_rows(None), "Memory roof")


def test_the_gauges_show_both_utilizations_and_which_roof_binds_and_keep_the_decode(model_path, report,
                                                                                   monkeypatch):
    monkeypatch.setattr(live_gauges, "_last_decode", None)
    h = read_header(model_path)
    lim = Limits(h, "f16", 1e12, "probe (1 threads)", mac_peak=30e9, mac_source="x")
    g = LiveGauges(n_ctx=512, limits=lim)
    g.start(0.0, 24, 512)
    g.finish(reply_stats(decode_tok_s=50.0, kv_used=35), 1.0)
    s = g.snapshot(1.0)
    r = g.limits.roofs(35, 50.0)
    assert s.binds == "compute" and s.compute_utilization == pytest.approx(r.compute_util)
    assert roofs_words(s) == f"compute {100 * r.compute_util:.0f}% of its roof · compute binds"
    kept = live_gauges.last_decode()
    assert kept is not None and (kept.position, kept.tok_s) == (35, 50.0)
    (mem,) = _rows(hardware_rows(report), "Memory roof")  # the panel reads the kept decode
    assert "% of it" in mem
    g.limits = Limits(h, "f16", 1e10, "probe (1 threads)")  # no compute peak measured here yet
    assert "compute roof not measured yet" in roofs_words(g.snapshot(1.0))


def test_the_panel_shows_the_roofs_line_and_its_bar_marks_the_binding_roofs_share(qtbot, model_path,
                                                                                   monkeypatch):
    from app.ui.chat.gauges import GaugesPanel

    monkeypatch.setattr(live_gauges, "_last_decode", None)
    lim = Limits(read_header(model_path), "f16", 1e12, "probe (1 threads)", mac_peak=30e9, mac_source="x")
    g = LiveGauges(n_ctx=512, limits=lim)
    g.start(0.0, 24, 512)
    g.finish(reply_stats(decode_tok_s=50.0, kv_used=35), 1.0)
    panel = GaugesPanel()
    qtbot.addWidget(panel)
    s = g.snapshot(1.0)
    panel.show_snapshot(s)
    assert panel.roofs.text() == roofs_words(s) and panel.roofs.text().endswith("· compute binds")
    assert panel.ceiling_bar.ceiling == pytest.approx(lim.roofs(35).compute_tok_s)
    assert panel.ceiling_bar.share == s.compute_utilization
