"""The bandwidth gauge mid-reply and after it: what the decode reads, against the probed peak."""

from __future__ import annotations

import re

from app.engine.gguf import read_header
from app.engine.utilization import peak_for, weight_bytes
from tests.ui.conftest import decode_to_max_tokens, small_config


def test_the_gauge_moves_mid_reply_and_agrees_with_bytes_times_rate_over_peak(qtbot, make_window, model_path):
    win = make_window(small_config(max_tokens=200))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    assert win.flow.gauges.limits is not None
    seen = []
    win.composer.set_text("Write a long story about the sea.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: win.flow.gauges.generated >= 20, timeout=60_000)
        qtbot.wait(300)
        seen.append(win.gauges.bandwidth.text())
    mid = seen[0]
    assert re.search(r"[\d.]+ GB/s · \d+% of peak · ceiling \d+ tok/s", mid), mid
    st = done.args[0].stats
    peak, _ = peak_for(win.loaded.report.n_threads)
    expected = weight_bytes(read_header(model_path)) * st.decode_tok_s / peak
    assert st.bw_utilization is not None and abs(st.bw_utilization - expected) / expected < 0.25
    qtbot.waitUntil(lambda: "% of peak" in win.gauges.bandwidth.text(), timeout=5_000)


def test_the_machine_rows_show_cpu_memory_and_no_nvidia_gpu(qtbot, make_window):
    win = make_window(small_config())
    qtbot.waitUntil(lambda: "CPU" in win.gauges.machine.text(), timeout=5_000)
    assert re.search(r"CPU \d+% \(cores [\d ]+\) · memory [\d,]+ MB", win.gauges.machine.text())
    assert win.gauges.gpu.text() == "no NVIDIA GPU"  # this machine has no NVML: said, nothing breaks


def test_a_loaded_local_model_has_its_compute_roof_and_the_gauges_hold_the_decode_to_both(qtbot, make_window):
    """The window measures the kernels' MAC rate when a model loads (once, then cached), so the
    first reply is already held to both roofs, not only after `llamadesk bench`."""
    win = make_window(small_config(max_tokens=16))
    assert win.flow.gauges.limits is not None and win.flow.gauges.limits.mac_peak > 0
    win.composer.set_text("Name a colour.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000):
        win.flow.send()
    qtbot.waitUntil(lambda: "binds" in win.gauges.roofs.text(), timeout=5_000)
    words = win.gauges.roofs.text()
    assert re.fullmatch(r"compute \d+% of its roof · (memory|compute) binds", words), words
