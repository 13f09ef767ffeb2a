"""The Compare window on real targets: two from the picker, one with its own settings; the table,
texts and chart after a run; cancel; a bad setting; reopening and exporting."""

from __future__ import annotations

import json

from tests.ui.conftest import small_config


def test_compare_two_targets_from_the_picker_and_reopen_it(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    cw = win.open_compare()
    assert cw.picker.count() >= 1  # the picker's entries
    cw.add_selected()
    cw.add_selected()
    cw.target_list.setCurrentRow(1)
    cw.set_edit.setText("threads=1, max_tokens=6")
    cw.apply_settings()
    assert cw.targets[1].settings_text == ["threads=1", "max_tokens=6"]
    cw.prompts.setPlainText("Name a colour.")
    cw.repeat.setValue(2)
    cw.max_tokens.setValue(8)
    with qtbot.waitSignal(cw.finished, timeout=120_000) as done:
        assert cw.start()
    rec = done.args[0]
    assert [r["runs"] for r in rec["rows"]] == [2, 2]
    assert rec["rows"][1]["settings"]["threads"] == 1
    assert cw.table.rowCount() == 2 and cw.table.item(0, 1).text() == "2"
    assert cw.texts.count() == 2 and "#2" in cw.texts.widget(1).toPlainText()
    assert len(cw.chart.rows) == 2 and all(r[2] for r in cw.chart.rows)
    cw.export(str(tmp_path / "c.md"))
    assert (tmp_path / "c.md").read_text().startswith("| target |")
    assert cw.history.count() >= 1  # kept in the history
    cw.comparison = None
    cw._reopen(0)
    assert cw.record["rows"][0]["target"] == rec["rows"][0]["target"]
    cw.export(str(tmp_path / "again.json"))
    assert json.loads((tmp_path / "again.json").read_text())["rows"][1]["runs"] == 2


def test_a_bad_setting_is_one_message_and_changes_nothing(qtbot, make_window):
    win = make_window(small_config())
    cw = win.open_compare()
    cw.add_selected()
    cw.set_edit.setText("threads=1, colour=red")
    cw.apply_settings()
    assert "unknown setting" in cw.bar.text() and cw.targets[0].settings_text == []
    cw.prompts.setPlainText("hi")
    assert not cw.start() and "2 to 6 targets" in cw.bar.text()


def test_cancel_stops_the_run_and_keeps_what_finished(qtbot, make_window):
    win = make_window(small_config())
    cw = win.open_compare()
    cw.add_selected()
    cw.add_selected()
    cw.prompts.setPlainText("Write a very long story about the sea.")
    cw.repeat.setValue(3)
    cw.max_tokens.setValue(2000)
    cw.worker.progress.connect(lambda *_: cw.cancel())
    with qtbot.waitSignal(cw.finished, timeout=120_000) as done:
        cw.start()
    rec = done.args[0]
    assert rec["cancelled"] and rec["rows"][0]["runs"] >= 1 and rec["rows"][1]["runs"] == 0
    assert "Cancelled" in cw.bar.text()


def test_earlier_comparisons_neither_widen_the_window_nor_show_as_chosen(qtbot, make_window):
    from app.compare import saved

    folder = saved.folder()
    folder.mkdir(parents=True, exist_ok=True)
    long = "a-model-with-a-very-long-file-name-Q4_K_M.gguf [threads=1, kv=q8_0, temperature=0.8]"
    for i in range(3):
        (folder / f"comparison-2026010{i}-000000.json").write_text(json.dumps(
            {"started_at": 1767225600 + i, "rows": [{"target": long}, {"target": long}]}))
    win = make_window(small_config())
    cw = win.open_compare()
    assert cw.history.count() == 3 and cw.history.currentIndex() == -1  # nothing chosen, nothing shown
    assert cw.table.rowCount() == 0
    assert cw.width() == 1000 and cw.minimumSizeHint().width() < 1000
    assert cw.windowTitle() == "Compare — LlamaDesk"  # Qt adds no second "LlamaDesk" to a title ending so
