"""The Batch panel on the real default model: results, live meters, pause, cancel, close."""

from __future__ import annotations

import json
import re
import time

import pytest
from PySide6.QtCore import Qt

from app.ui.batch.results import ResultDialog
from tests.ui.conftest import ask, decode_to_max_tokens, small_config

PROMPTS = "\n".join(f"Count from 1 to {n}." for n in range(1, 7))


def _panel(win, tmp_path, slots=3, max_tokens=12, prompts=PROMPTS, full_length=False):
    """`full_length`: every request runs to max_tokens, so the batch is still busy when acted on."""
    panel = win.open_batch()
    if full_length:
        panel.settings_source = decode_to_max_tokens(panel.settings_source)
    panel.paste.setPlainText(prompts)
    panel.output_edit.setText(str(tmp_path / "out.jsonl"))
    panel.slots.setValue(slots)
    panel.max_tokens.setValue(max_tokens)
    return panel


def _lines(path) -> list[dict]:
    return [json.loads(s) for s in path.read_text().splitlines() if s.strip()]


def test_pasted_prompts_fill_the_table_and_the_output(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    panel = _panel(win, tmp_path)
    seen, lines = [], []
    panel.progress_shown.connect(lambda p: seen.append((p.done, p.busy_slots, time.perf_counter())))
    panel.progress_shown.connect(lambda p: lines.append(panel.rate_label.text()))
    with qtbot.waitSignal(panel.batch_finished, timeout=120_000) as blocker:
        assert panel.start()
    summary = blocker.args[0]
    assert summary is not None and summary.ok == 6
    assert panel.table.rowCount() == 6
    ids = {panel.table.item(r, 7).text() for r in range(6)}
    assert len(ids) == 6 and all(i.startswith("#") for i in ids)  # automatic ids of plain-text lines
    assert all(panel.table.item(r, 2).text() == "ok" for r in range(6))
    out = _lines(tmp_path / "out.jsonl")
    assert len(out) == 6 and {o["custom_id"] for o in out} == ids
    assert sorted(o["llamadesk"]["line"] for o in out) == list(range(1, 7))
    # live, not only at the end: several repaints with different values while it ran
    assert len(seen) >= 3
    assert len({d for d, _, _ in seen}) >= 3, seen
    busy = [b for _, b, _ in seen]
    assert max(busy) >= 2 and len(set(busy)) >= 2, busy  # occupancy moved during the run
    # Aggregate tok/s against the batched ceiling of the sequences decoding.
    ceiling = r"\d+% of the \d+ tok/s ceiling for \d sequences? \((memory bandwidth|arithmetic)\)"
    assert any(re.search(ceiling, t) for t in lines), lines
    assert panel.slot_bar.maximum() == 3
    assert panel.done_bar.value() == 6
    dlg = panel.open_result(panel.table.result_at(0))
    assert isinstance(dlg, ResultDialog) and dlg.text.toPlainText() == panel.table.result_at(0).text
    assert "tokens:" in dlg.stats_label.text()
    dlg.close()
    panel.save_results(str(tmp_path / "copy.jsonl"))
    assert (tmp_path / "copy.jsonl").read_text() == (tmp_path / "out.jsonl").read_text()
    assert not panel.runner.running


@pytest.mark.slow
def test_pause_stops_progress_and_resume_continues(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    panel = _panel(win, tmp_path, slots=2, max_tokens=48)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.generated > 0, timeout=60_000)
    panel.toggle_pause()
    assert panel.pause_button.text() == "Resume"
    qtbot.waitUntil(lambda: panel.progress.paused, timeout=10_000)
    frozen = panel.progress.generated
    qtbot.wait(800)
    assert panel.progress.generated == frozen and panel.progress.paused
    assert panel.runner.running
    with qtbot.waitSignal(panel.batch_finished, timeout=120_000) as blocker:
        panel.toggle_pause()
    assert blocker.args[0].ok == 6 and panel.progress.generated > frozen
    assert len(_lines(tmp_path / "out.jsonl")) == 6


def test_cancel_stops_and_joins_the_thread(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    panel = _panel(win, tmp_path, slots=2, max_tokens=200, full_length=True)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.generated > 0, timeout=60_000)
    t = time.perf_counter()
    assert panel.cancel()
    assert time.perf_counter() - t < 2.0
    assert panel.runner.batch_thread is None and panel.start_button.isEnabled()
    out = tmp_path / "out.jsonl"
    written = len(_lines(out)) if out.exists() else 0
    assert written < 6  # 200-token requests were cut off, not finished
    qtbot.wait(500)
    assert (len(_lines(out)) if out.exists() else 0) == written  # nothing runs after cancel
    # a new run right after a cancel is not stopped by the old run's late signals
    panel.max_tokens.setValue(8)
    panel.output_edit.setText(str(tmp_path / "again.jsonl"))
    with qtbot.waitSignal(panel.batch_finished, timeout=120_000) as blocker:
        assert panel.start()
    assert blocker.args[0].ok == 6 and len(_lines(tmp_path / "again.jsonl")) == 6


def test_bad_input_file_is_a_one_line_error(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    panel = _panel(win, tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    panel.input_edit.setText(str(empty))
    with qtbot.waitSignal(panel.batch_finished, timeout=30_000) as blocker:
        panel.start()
    assert blocker.args[0] is None
    assert panel.bar.isVisible() and "empty" in panel.bar.text() and "\n" not in panel.bar.text()
    assert panel.start_button.isEnabled() and panel.runner.batch_thread is None


def test_chat_during_a_batch_uses_the_online_slot(qtbot, make_window, tmp_path):
    win = make_window(small_config(n_ctx=2048, max_tokens=8))
    panel = _panel(win, tmp_path, slots=2, max_tokens=64)
    panel.route_chat.setChecked(True)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.busy_slots > 0, timeout=60_000)
    slot_ctx = panel.runner.worker.engine.slot_ctx
    msg = ask(qtbot, win, "Say hi.")
    # served by the batch engine's online slot (its context), not the chat's 2048-token one
    assert msg.content and msg.stats.n_ctx == slot_ctx != 2048
    assert 0 < msg.stats.decode_tokens <= 8 and msg.stats.ttft_s is not None
    assert panel.runner.running
    qtbot.waitUntil(lambda: panel.done_bar.maximum() == 6, timeout=2_000)  # the chat turn is not counted
    panel.cancel()
    out = _lines(tmp_path / "out.jsonl") if (tmp_path / "out.jsonl").exists() else []
    assert all(o["custom_id"].startswith("#") for o in out)  # the chat turn is not a batch result
    after = ask(qtbot, win, "Say hi.")  # no batch: the chat's own context again
    assert after.stats.n_ctx == 2048


def test_closing_the_window_during_a_batch_exits_promptly(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    panel = _panel(win, tmp_path, slots=3, max_tokens=400, full_length=True)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.generated > 0, timeout=60_000)
    t = time.perf_counter()
    win.close()
    assert time.perf_counter() - t < 3.0
    assert panel.runner.batch_thread is None and win.bridge.engine_thread.isFinished()


def test_every_count_comes_from_one_source_and_rows_keep_input_order(qtbot, make_window, tmp_path):
    """12 prompts on 8 slots: the bar never says "/ 1", never lags the rows, and ends at 12/12;
    the rows show each prompt, in the input's order whatever order they finished in."""
    prompts = [f"Count from 1 to {n}." for n in range(12, 0, -1)]  # the longest first: they finish last
    win = make_window(small_config())
    panel = _panel(win, tmp_path, slots=8, max_tokens=24, prompts="\n".join(prompts))
    seen = []

    def look(_p) -> None:
        c = panel.counts
        seen.append((panel.done_bar.value(), panel.done_bar.maximum(), panel.table.rowCount(),
                     panel.slot_bar.value(), c.running, c.queued, c.total))

    panel.progress_shown.connect(look)
    with qtbot.waitSignal(panel.batch_finished, timeout=180_000) as done:
        assert panel.start()
        assert "/ 1" not in panel.done_bar.text()
    summary = done.args[0]
    assert summary.ok == 12
    for value, maximum, rows, busy, running, queued, total in seen:
        assert maximum == total == 12 and value == rows  # the bar is the table's count
        assert busy == running <= 8 and rows + running + queued == 12
    assert any(q > 0 for *_, q, _t in seen) and any(r == 8 for *_, r, _q, _t in seen)
    assert (panel.done_bar.value(), panel.done_bar.maximum()) == (12, 12)
    t = panel.table
    assert [t.item(r, 0).text() for r in range(12)] == [str(n) for n in range(1, 13)]  # input order
    assert [t.item(r, 1).text() for r in range(12)] == prompts  # each row's own prompt
    assert [res.line for res in t.in_order()] == list(range(1, 13))  # whatever order they arrived in
    t.sortByColumn(3, Qt.SortOrder.DescendingOrder)  # tokens, by the header
    tokens = [int(t.item(r, 3).text()) for r in range(12)]
    assert tokens == sorted(tokens, reverse=True)


def test_chat_routed_to_the_batch_keeps_the_context_budget(qtbot, make_window, tmp_path):
    """The online slot holds less than the chat's own context: old turns are left out
    (and marked), exactly as the chat's own engine leaves them out when its context is full."""
    from app.chat.conversation import LiveConversation, LiveMessage

    win = make_window(small_config(n_ctx=4096, max_tokens=8))
    long = "The quick brown fox jumps over the lazy dog. " * 20  # ~200 tokens a turn
    conv = LiveConversation(messages=[LiveMessage(role, f"{i}: {long}") for i in range(4)
                                  for role in ("user", "assistant")])
    win.flow.new_chat(conv)
    panel = _panel(win, tmp_path, slots=1, max_tokens=400, full_length=True)
    panel.route_chat.setChecked(True)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.busy_slots > 0, timeout=60_000)
    slot_ctx = panel.runner.worker.engine.slot_ctx
    msg = ask(qtbot, win, "Say hi.")
    assert msg.stats.n_ctx == slot_ctx < 1600  # the turn was answered in the batch's online slot
    assert msg.stats.dropped_messages > 0 and msg.stats.prompt_tokens + 8 <= slot_ctx
    marked = [i for i, m in enumerate(win.flow.conversation.messages) if m.out_of_context]
    assert marked == list(range(msg.stats.dropped_messages))
    panel.cancel()


def test_a_turn_too_long_for_the_online_slot_is_a_context_overflow(qtbot, make_window, tmp_path):
    win = make_window(small_config(n_ctx=4096, max_tokens=8))
    panel = _panel(win, tmp_path, slots=1, max_tokens=400, full_length=True)
    panel.route_chat.setChecked(True)
    panel.start()
    qtbot.waitUntil(lambda: panel.progress is not None and panel.progress.busy_slots > 0, timeout=60_000)
    huge = "word " * 1500  # fits the chat's 4096 tokens, not the 1024-token slot
    win.composer.set_text(huge)
    with qtbot.waitSignal(win.flow.reply_failed, timeout=60_000):
        win.flow.send()
    assert win.bar.text().startswith("Context overflow: ") and "\n" not in win.bar.text()
    assert win.composer.text() == huge  # given back, nothing lost
    panel.cancel()
