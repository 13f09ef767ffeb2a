"""Documents in the real window on the real model: a Markdown file attached through the composer
(its API, and a drop built from QMimeData urls), its chip's tokens, a question answered with the
document whole and then, with a long document and a small context, with retrieved passages; the
sources under the reply open the passage dialog with the passage selected; reopened from the
history (real SQLite under the test's XDG dir), the reply still has them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.engine.message import DOCS_RETRIEVED, DOCS_WHOLE
from app.history.store import Store
from tests.ui.conftest import small_config

ROOT = Path(__file__).resolve().parents[2]

GUIDE = """# Harbour guide

## Opening hours

The lighthouse museum on Pier Nine opens at 10:40 every morning and closes at dusk.

## Tickets

A ticket costs eleven crowns and includes the tower climb.
"""


def chips_shown(win) -> int:
    return len(win.composer.chips.chips)


def attach(qtbot, win, path: Path) -> None:
    n = chips_shown(win)
    win.composer.attach_paths([path])
    qtbot.waitUntil(lambda: chips_shown(win) == n + 1 and not win.composer.reading, timeout=20_000)


def drop(widget, paths: list[Path]) -> None:
    """A drop as the platform delivers one: a QDropEvent carrying file URLs."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    ev = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                    Qt.KeyboardModifier.NoModifier)
    widget.dropEvent(ev)
    assert ev.isAccepted()


def answered(qtbot, win, text: str):
    win.composer.set_text(text)
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as got:
        assert win.flow.send()
    return got.args[0]


def open_source(qtbot, win, n: int):
    """Click source [n] of the last reply as the view's link does."""
    index = len(win.view._messages) - 1
    win.view.anchorClicked.emit(QUrl(f"src:{index}/{n}"))
    dlg = win.documents.dialog
    assert dlg is not None and dlg.isVisible()
    return dlg


def test_an_attached_markdown_file_goes_whole_and_its_source_opens_and_reopens(qtbot, make_window, tmp_path):
    win = make_window(small_config(n_ctx=2048, max_tokens=16))
    doc = tmp_path / "harbour.md"
    doc.write_text(GUIDE, encoding="utf-8")
    attach(qtbot, win, doc)
    chip = win.composer.chips.chips[0]
    att = chip.pending.attachment
    counted = len(win.loaded.model.llm.tokenize(GUIDE.encode(), add_bos=False, special=False))
    assert att.tokens == counted > 0 and att.kind == "markdown"
    assert chip.label.text() == f"harbour.md · {counted:,} tok" and chip.isVisibleTo(win)

    # A bad file is one line in the bar and no chip.
    bad = tmp_path / "photo.txt"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    win.composer.attach_paths([bad])
    qtbot.waitUntil(lambda: not win.composer.reading, timeout=20_000)
    assert chips_shown(win) == 1 and "photo.txt" in win.bar.text() and "\n" not in win.bar.text()

    assert not win.flow.send() and "Type a question" in win.bar.text()  # documents alone ask nothing
    reply = answered(qtbot, win, "When does the lighthouse museum open?")
    assert chips_shown(win) == 0 and not win.composer.chips.isVisible()
    question = win.flow.conversation.messages[0]
    assert question.content == "When does the lighthouse museum open?"  # the user's words, not the prompt
    assert question.attachments == (att,)
    assert reply.docs is not None and reply.docs.mode == DOCS_WHOLE
    assert reply.docs.tokens >= counted  # the document and its frame in the prompt
    assert [s.n for s in reply.docs.sources] == [1] and reply.docs.sources[0].sha256 == att.sha256
    shown = win.view.toPlainText()
    assert f"Documents whole · {reply.docs.tokens:,} tok" in shown and "[1] harbour.md" in shown
    assert f"Attached: harbour.md · {counted:,} tok" in shown  # named on the question

    src = reply.docs.sources[0]
    dlg = open_source(qtbot, win, 1)
    assert dlg.found and dlg.passage() == GUIDE[src.start:src.end]

    cid = win.flow.conversation.id
    with Store.open() as s:
        stored = s.get_conversation(cid)
        assert stored.messages[0].attachments == (att,) and stored.messages[1].docs == reply.docs
        assert s.document(att.sha256).text == GUIDE
    win.new_chat()
    assert "Documents whole" not in win.view.toPlainText()
    win.history.open(cid)
    reopened = win.flow.conversation.messages[1]
    assert reopened.docs == reply.docs
    assert f"Documents whole · {reply.docs.tokens:,} tok" in win.view.toPlainText()
    doc.unlink()  # the text comes from the store, not the file
    dlg = open_source(qtbot, win, 1)
    assert dlg.found and dlg.passage() == GUIDE[src.start:src.end]

    # Regenerated after reopening: the question is given its document again, from the store.
    with qtbot.waitSignal(win.flow.reply_finished, timeout=120_000) as got:
        assert win.flow.regenerate()
    again = got.args[0]
    assert again.docs is not None and again.docs.mode == DOCS_WHOLE and again.docs.tokens == reply.docs.tokens
    assert again.docs.sources == reply.docs.sources and again.version() == (2, 2)


def test_a_long_document_in_a_small_context_is_retrieved_and_each_source_maps_to_its_passage(
        qtbot, make_window, tmp_path):
    win = make_window(small_config(n_ctx=1024, max_tokens=16))
    text = "\n\n".join((ROOT / p).read_text(encoding="utf-8") for p in
                       ("docs/architecture.md", "docs/transcript-format.md"))
    doc = tmp_path / "llamadesk-notes.md"
    doc.write_text(text, encoding="utf-8")
    drop(win.composer.edit, [doc])  # a drop on the box
    qtbot.waitUntil(lambda: chips_shown(win) == 1 and not win.composer.reading, timeout=20_000)
    assert win.composer.text() == ""  # a dropped file is attached, not its path typed
    att = win.composer.chips.pending[0].attachment
    assert att.tokens > 1024  # it cannot fit whole

    reply = answered(qtbot, win, "How is a conversation transcript versioned?")
    docs = reply.docs
    assert docs is not None and docs.mode == DOCS_RETRIEVED and docs.sources
    assert docs.tokens < 1024 and reply.stats.kv_used <= 1024  # the passages and the frame fit, measured
    assert reply.stats.reply_limit is None  # and the reply kept its whole budget
    assert [s.n for s in docs.sources] == list(range(1, len(docs.sources) + 1))
    body = doc.read_text(encoding="utf-8")
    for s in docs.sources:
        assert s.sha256 == att.sha256 and 0 <= s.start < s.end <= len(body)
    n = len(docs.sources)
    assert f"Retrieved {n} passage{'s' if n != 1 else ''}" in win.view.toPlainText()
    last = docs.sources[-1]
    dlg = open_source(qtbot, win, last.n)
    assert dlg.found and dlg.passage() == body[last.start:last.end]
    assert dlg.windowTitle().startswith(f"[{last.n}] llamadesk-notes.md")

    # The next question is given the document again (it belongs to the conversation now).
    again = answered(qtbot, win, "What does the engine thread own?")
    assert again.docs is not None and again.docs.mode == DOCS_RETRIEVED
    assert {s.sha256 for s in again.docs.sources} == {att.sha256}


def test_files_dropped_on_the_transcript_become_chips_and_the_cross_takes_one_back(
        qtbot, make_window, tmp_path):
    win = make_window(small_config())
    a, b = tmp_path / "a.md", tmp_path / "b.txt"
    a.write_text("# A\n\nalpha text", encoding="utf-8")
    b.write_text("beta text", encoding="utf-8")
    drop(win.view, [a, b])
    qtbot.waitUntil(lambda: chips_shown(win) == 2 and not win.composer.reading, timeout=20_000)
    assert sorted(p.attachment.name for p in win.composer.chips.pending) == ["a.md", "b.txt"]
    first = win.composer.chips.chips[0]
    gone = first.pending.attachment.name
    first.close_button.click()
    left = [p.attachment.name for p in win.composer.chips.pending]
    assert left == [n for n in ("a.md", "b.txt") if n != gone]
    drop(win.view, [a, b])  # the same texts again: no second chip for either
    qtbot.waitUntil(lambda: not win.composer.reading, timeout=20_000)
    assert chips_shown(win) == 2


def test_a_pdf_chip_counts_its_pages_a_locked_one_is_one_line_and_a_page_is_a_source(
        qtbot, make_window, tmp_path):
    from tests.docs.files import PAGES, pdf

    win = make_window(small_config(n_ctx=1024, max_tokens=12))
    locked = pdf(tmp_path / "locked.pdf", password="secret")
    win.composer.attach_paths([locked])
    qtbot.waitUntil(lambda: not win.composer.reading, timeout=20_000)
    assert chips_shown(win) == 0 and "locked.pdf" in win.bar.text() and "\n" not in win.bar.text()

    book = pdf(tmp_path / "island.pdf")
    attach(qtbot, win, book)
    chip = win.composer.chips.chips[0]
    assert chip.pending.attachment.pages == 3 and chip.label.text().startswith("island.pdf · 3 pages · ")
    notes = tmp_path / "notes.md"  # with it, the two cannot go whole in 1,024 tokens
    notes.write_text((ROOT / "docs/architecture.md").read_text(encoding="utf-8"), encoding="utf-8")
    attach(qtbot, win, notes)

    reply = answered(qtbot, win, "When does the ferry to Vlieland leave?")
    docs = reply.docs
    assert docs is not None and docs.mode == DOCS_RETRIEVED
    page = next(s for s in docs.sources if s.document == "island.pdf")
    assert page.where == "page 2"
    dlg = open_source(qtbot, win, page.n)
    assert dlg.found and "ferry to Vlieland leaves at seven fifteen" in dlg.passage()
    assert PAGES[0] not in dlg.passage()  # the passage, not the whole document


def test_a_dozen_chips_scroll_sideways_and_the_window_keeps_its_smallest_width(qtbot, make_window, tmp_path):
    win = make_window(small_config())
    files = []
    for i in range(12):
        f = tmp_path / f"a-rather-long-document-name-{i:02}.md"
        f.write_text(f"# Part {i}\n\nsome words of part {i}", encoding="utf-8")
        files.append(f)
    win.resize(900, 600)
    win.composer.attach_paths(files)
    qtbot.waitUntil(lambda: chips_shown(win) == 12 and not win.composer.reading, timeout=30_000)
    qtbot.wait(100)
    assert win.width() == 900 and win.minimumSizeHint().width() <= 900
    chips = win.composer.chips
    assert chips.horizontalScrollBar().maximum() > 0  # the rest are a scroll away
    bar = chips.horizontalScrollBar()
    assert bar.value() == bar.maximum()  # the newest scrolled into view
    last = chips.chips[-1]
    assert chips.viewport().rect().contains(last.mapTo(chips.viewport(), last.rect().topRight()))
