"""Ctrl+E export and Import in the real window: every format written and read back,
a failed write or a malformed file is one line in the message bar and writes nothing. Both run
on the llamadesk-history-files thread, one at a time, and closing the window ends it."""

from __future__ import annotations

import json
import threading
from html.parser import HTMLParser

import pytest
from PySide6.QtCore import Qt, QThread
from PySide6.QtWidgets import QFileDialog

from app.history.store import Store
from tests.ui.conftest import ask, small_config


@pytest.fixture
def chatted(qtbot, make_window):
    win = make_window(small_config(max_tokens=12))
    msg = ask(qtbot, win, "Name three colours.")
    return win, msg


def press_ctrl_e(qtbot, win, monkeypatch, path: str, chosen: str = "Markdown (*.md)") -> list:
    asked = []

    def fake_dialog(parent, caption, start, filters):
        asked.append((caption, start, filters))
        return path, chosen
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake_dialog))
    qtbot.keyClick(win, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: win.history.files.busy is None, timeout=10_000)  # written, or failed
    return asked


@pytest.mark.parametrize("fmt", ["md", "json", "html", "txt"])
def test_ctrl_e_writes_each_format_with_the_stats(qtbot, chatted, monkeypatch, tmp_path, fmt):
    win, msg = chatted
    out = tmp_path / f"chat.{fmt}"
    asked = press_ctrl_e(qtbot, win, monkeypatch, str(out))
    assert asked and all(f"*.{x}" in asked[0][2] for x in ("md", "json", "html", "txt"))
    assert asked[0][1].endswith("Name three colours.md")
    text = out.read_text(encoding="utf-8")
    visible = text
    if fmt == "html":
        chunks = []
        parser = HTMLParser()
        parser.handle_data = chunks.append
        parser.feed(text)
        visible = "".join(chunks)
    assert msg.content.strip()[:15] in visible
    if fmt == "json":
        doc = json.loads(text)
        assert [m["role"] for m in doc["conversation"]["messages"]] == ["user", "assistant"]
        assert doc["conversation"]["messages"][1]["content"] == msg.content
        assert doc["conversation"]["messages"][1]["stats"]["decode_tokens"] == msg.stats.decode_tokens
    elif fmt == "html":
        assert "Name three colours." in visible
    else:
        assert str(msg.stats.decode_tokens) in text
    assert "Exported to" in win.statusBar().currentMessage()


def test_export_picks_the_extension_from_the_filter_and_reports_a_failed_write(
        qtbot, chatted, monkeypatch, tmp_path):
    win, _ = chatted
    press_ctrl_e(qtbot, win, monkeypatch, str(tmp_path / "plain"), "JSON (*.json)")
    assert json.loads((tmp_path / "plain.json").read_text())["conversation"]["messages"]
    blocked = tmp_path / "no-such-dir" / "chat.md"
    press_ctrl_e(qtbot, win, monkeypatch, str(blocked))
    assert win.bar.level == "error" and win.bar.text().startswith("Export failed:")
    assert "\n" not in win.bar.text()
    assert not blocked.parent.exists() or not any(blocked.parent.iterdir())


def test_export_of_an_empty_chat_says_so(qtbot, make_window, tmp_path):
    win = make_window(small_config(), wait=False)
    assert win.history.export_current(str(tmp_path / "x.md")) is None
    assert "Nothing to export" in win.bar.text() and not (tmp_path / "x.md").exists()


def test_import_round_trips_and_opens_the_conversation(qtbot, chatted, tmp_path):
    win, msg = chatted
    src = win.flow.conversation.id
    path = tmp_path / "t.json"
    with qtbot.waitSignal(win.history.exported, timeout=10_000) as wrote:
        assert win.history.export_current(str(path)) == str(path)
    assert wrote.args[0] == path
    with qtbot.waitSignal(win.history.imported, timeout=10_000) as done:
        assert win.history.import_file(str(path)) == str(path)
    new = done.args[0]
    assert new is not None and new != src
    assert win.flow.conversation.id == new and set(win.history_panel.ids()) == {src, new}
    with Store.open() as s:
        a, b = s.get_conversation(src), s.get_conversation(new)
    strip = lambda c: [(m.role, m.content, m.stats, m.state, m.out_of_context) for m in c.messages]
    assert strip(a) == strip(b) and a.title == b.title
    assert msg.stats.summary() in win.view.toPlainText()


@pytest.mark.parametrize("body", ['{"format": "llamadesk.transcript", "version": 999, "messages": []}',
                                  "{not json", '{"messages": [{"role": "wizard"}]}'])
def test_a_malformed_transcript_is_one_error_line_and_adds_nothing(qtbot, make_window, tmp_path, body,
                                                                   monkeypatch):
    win = make_window(small_config(), wait=False)
    bad = tmp_path / "bad.json"
    bad.write_text(body, encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a: (str(bad), "LlamaDesk transcript (*.json)")))
    with qtbot.waitSignal(win.history.file_failed, timeout=10_000):
        win.history_panel.import_button.click()
    assert win.bar.level == "error" and win.bar.text().startswith("Import failed:")
    assert "\n" not in win.bar.text()
    assert win.history_panel.ids() == []
    with Store.open() as s:
        assert s.list_conversations() == []


@pytest.fixture
def held_export(monkeypatch):
    """The exporter, held on its thread until `release` is set: an export caught mid-way."""
    from app.ui.history import files

    started, release, ran_on = threading.Event(), threading.Event(), []
    real = files.exporter.export

    def slow(conv, path):
        ran_on.append(QThread.currentThread().objectName())
        started.set()
        release.wait(10)
        return real(conv, path)
    monkeypatch.setattr(files.exporter, "export", slow)
    yield started, release, ran_on
    release.set()


def test_an_export_runs_off_the_gui_thread_says_so_and_refuses_a_second_one(
        qtbot, chatted, held_export, tmp_path):
    win, _ = chatted
    started, release, ran_on = held_export
    out = tmp_path / "slow.md"
    assert win.history.export_current(str(out)) == str(out)
    assert started.wait(10) and ran_on == ["llamadesk-history-files"]
    assert win.statusBar().currentMessage() == f"Exporting to {out}…"
    panel = win.history_panel
    assert not panel.export_button.isEnabled() and not panel.import_button.isEnabled()
    assert not win.history.export_shortcut.isEnabled()
    assert win.history.export_current(str(tmp_path / "second.md")) is None
    assert win.bar.text() == "An export is still running: wait for it to finish."
    assert win.history.import_file(str(out)) is None  # nor an import meanwhile
    with qtbot.waitSignal(win.history.exported, timeout=10_000) as wrote:
        release.set()
    assert wrote.args[0] == out and out.read_text(encoding="utf-8").strip()
    assert not (tmp_path / "second.md").exists()
    assert panel.export_button.isEnabled() and panel.import_button.isEnabled()
    assert "Exported to" in win.statusBar().currentMessage()


def test_closing_the_window_lets_an_export_in_flight_finish_whole_and_ends_its_thread(
        qtbot, chatted, held_export, tmp_path):
    win, _ = chatted
    started, release, _ = held_export
    out = tmp_path / "closing.md"
    win.history.export_current(str(out))
    assert started.wait(10)
    release.set()
    win.close()
    assert win.history.files.files_thread.isFinished()
    assert out.read_text(encoding="utf-8").strip(), "written whole before the store closed"
    assert win.history.export_current(str(tmp_path / "after.md")) is None  # nothing starts any more
