"""The Collections window on a real folder and a real index (SQLite under the test's tmp dir): a
folder indexed off the GUI thread with its progress shown, listed with its files and pages; a
file deleted since is counted missing until a re-index drops it; Cancel stops a long index between
files and keeps what was done; Remove drops the index, never the files. Then a collection chosen
for a conversation in the window answers a question with its passages as sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QUrl

from app.engine.message import DOCS_RETRIEVED
from app.history.store import Store
from app.ui.docs.chooser import DocsChooser
from app.ui.docs.window import CollectionsWindow
from tests.ui.conftest import small_config
from tests.ui.test_docs_chat import drop


def folder(root: Path, n: int, words: int = 60) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = " ".join(f"word{(i * 7 + k) % 97}" for k in range(words))
        (root / f"note{i:04}.md").write_text(f"# Note {i}\n\n## Section {i}\n\n{body}\n", encoding="utf-8")
    return root


@pytest.fixture
def window(qtbot, tmp_path):
    """A Collections window on its own index; its thread ended at teardown, as the main window's
    shutdown ends it."""
    made: list[CollectionsWindow] = []

    def make() -> CollectionsWindow:
        win = CollectionsWindow(tmp_path / "docs.db")
        qtbot.addWidget(win)
        win.show()
        made.append(win)
        return win

    yield make
    for win in made:
        win.shutdown()
        assert win.service.worker_thread.isFinished()


def test_a_folder_is_indexed_with_visible_progress_listed_and_reindexed(qtbot, tmp_path, window):
    win = window()
    root = folder(tmp_path / "notes", 12)
    seen: list[tuple[int, int, str]] = []
    win.service.progress.connect(lambda job, p: seen.append((win.bar.value(), win.bar.maximum(),
                                                             win.progress_line.text())))
    with qtbot.waitSignal(win.indexed, timeout=60_000) as got:
        job = win.add_folder(root, "notes")
        assert job is not None and win.progress_box.isVisible() and not win.add_button.isEnabled()
    assert got.args == ["notes"]
    assert seen and seen[-1][1] == 12  # the bar counted the folder's files
    assert any("of 12 files" in line for _, _, line in seen)
    assert not win.progress_box.isVisible() and win.add_button.isEnabled()
    assert win.status.text().startswith("Indexed «notes»: 12 added")
    assert win.names() == ["notes"]
    row = [win.table.item(0, k).text() for k in range(win.table.columnCount())]
    assert row[0] == "notes" and row[1] == str(root) and row[2] == "12" and row[4] == ""

    (root / "note0003.md").unlink()
    win.refresh()
    assert win.table.item(0, 4).text() == "1"  # deleted since: counted missing
    win.table.selectRow(0)
    with qtbot.waitSignal(win.indexed, timeout=60_000):
        assert win.reindex_selected() is not None
    assert "11 unchanged" in win.status.text() and "1 deleted since (note0003.md)" in win.status.text()
    assert win.table.item(0, 2).text() == "11" and win.table.item(0, 4).text() == ""

    win.table.selectRow(0)
    win.remove_selected()
    assert win.names() == [] and win.table.rowCount() == 0 and (root / "note0000.md").exists()


def test_cancel_stops_a_long_index_between_files_and_keeps_what_was_done(qtbot, tmp_path, window):
    win = window()
    root = folder(tmp_path / "many", 400, words=200)
    first: list[int] = []

    def on_progress(job, p) -> None:
        if p.files_done >= 3 and not first:
            first.append(p.files_done)
            win.cancel()

    win.service.progress.connect(on_progress)
    with qtbot.waitSignal(win.changed, timeout=120_000):
        assert win.add_folder(root, "many") is not None
    assert first, "no progress was reported before the index ended"
    assert win.status.text().startswith("Cancelled «many»: what was indexed stays")
    files = int(win.table.item(0, 2).text().replace(",", ""))
    assert first[0] <= files < 400  # stopped between files, what was done kept
    assert win.add_button.isEnabled() and not win.progress_box.isVisible()


def test_a_bad_folder_is_one_line_and_nothing_starts(qtbot, tmp_path, window):
    win = window()
    assert win.add_folder(tmp_path / "nowhere", "x") is None
    assert win.status.text() == f"Not a folder: {tmp_path / 'nowhere'}" and win.job is None


def test_the_docs_chooser_lists_the_collections_and_a_chosen_one_answers_in_the_window(
        qtbot, make_window, tmp_path, monkeypatch):
    root = tmp_path / "handbook"
    root.mkdir()
    boats = ("# Boats\n\n## Mooring\n\nEvery boat moored at the marina pays a fee of forty crowns a night, "
             "collected by the harbour master.\n")
    (root / "boats.md").write_text(boats, encoding="utf-8")
    (root / "birds.md").write_text("# Birds\n\nGulls nest on the breakwater in spring.\n", encoding="utf-8")
    win = make_window(small_config(n_ctx=1024, max_tokens=12))
    coll = win.documents.open_collections()
    with qtbot.waitSignal(coll.indexed, timeout=60_000):
        coll.add_folder(root, "handbook")
    win.docs.fill()
    assert list(win.docs.actions_by_name) == ["handbook"]
    win.docs.actions_by_name["handbook"].setChecked(True)
    assert win.flow.conversation.collections == ["handbook"] and win.docs.button.text() == "Docs: handbook"

    win.composer.set_text("What fee does a moored boat pay?")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as got:
        assert win.flow.send()
    docs = got.args[0].docs
    assert docs is not None and docs.mode == DOCS_RETRIEVED
    assert docs.sources[0].document == "boats.md" and docs.sources[0].collection == "handbook"
    assert "(handbook)" in win.view.toPlainText()
    win.view.anchorClicked.emit(QUrl(f"src:{len(win.view._messages) - 1}/1"))
    dlg = win.documents.dialog
    text = (root / "boats.md").read_text(encoding="utf-8")
    s = docs.sources[0]
    assert dlg.found and dlg.passage() == text[s.start:s.end]

    cid = win.flow.conversation.id
    win.new_chat()
    assert win.docs.button.text() == "Docs"
    win.history.open(cid)
    assert win.docs.names == ["handbook"]  # saved with the conversation
    with Store.open() as st:
        assert st.get_conversation(cid).settings.get("collections") == ["handbook"]


def test_the_chooser_keeps_a_removed_collection_listed_until_it_is_unchecked(qtbot, tmp_path):
    chooser = DocsChooser(tmp_path / "docs.db")
    qtbot.addWidget(chooser)
    chooser.known = lambda: ["a"]
    picked: list[list[str]] = []
    chooser.chosen.connect(picked.append)
    chooser.show_collections(["a", "gone"])
    chooser.fill()
    assert [a.text() for a in chooser.menu.actions()[:2]] == ["a", "gone (removed)"]
    assert picked == []  # showing the conversation's choice is not a choice
    chooser.actions_by_name["gone"].setChecked(False)
    assert picked == [["a"]] and chooser.button.text() == "Docs: a"


def test_a_folder_dropped_on_the_chat_is_indexed_as_a_collection_and_chosen_for_it(
        qtbot, make_window, tmp_path):
    root = folder(tmp_path / "field-notes", 5)
    win = make_window(small_config())
    drop(win.view, [root])
    coll = win.documents.collections
    assert coll is not None and coll.isVisible() and coll.job is not None  # its progress on screen
    assert win.flow.conversation.collections == ["field-notes"]
    assert win.docs.button.text() == "Docs: field-notes"
    assert "Indexing «field-notes»" in win.bar.text()
    assert win.composer.chips.chips == []  # a folder is not attached file by file
    qtbot.waitUntil(lambda: coll.job is None, timeout=60_000)
    assert coll.names() == ["field-notes"] and coll.table.item(0, 2).text() == "5"
