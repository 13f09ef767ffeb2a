"""Live Markdown in the transcript: finished blocks rendered while the reply streams.

Real ChatView widgets offscreen; the last test streams a real reply of the
bundled model through the real window.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication, QTextCursor, QTextTable

from app.bench.gui import MARKDOWN_PROMPT, MARKDOWN_SHOT
from app.chat.conversation import LiveConversation, LiveMessage
from app.ui.chat.markdown import markdown_parser
from app.ui.chat.view import ChatView
from tests.ui.conftest import ask, decode_to_max_tokens, small_config
from tests.ui.test_markdown_blocks import split_text

MD = markdown_parser()
MIXED = ("| t | u |\n|---|---|\n| 1 | 2 |\n\n# Head\n\npara\nline 2\n\n```python\nx = 1\n```\n\n"
         "- a\n- b\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n1. one\n2. two\n\n> quote\n\n---\n\n"
         "```\nc\n```\n| x | y |\n|--|--|\n|3|4|\n\nend\n\n")


@pytest.fixture
def view(qtbot):
    v = ChatView()
    qtbot.addWidget(v)
    v.resize(640, 900)
    v.show()
    v.add_message(LiveMessage("user", "a question"))
    return v


def stream(view: ChatView, text: str, step: int = 3) -> None:
    for i in range(0, len(text), step):
        view.live_append(text[i:i + step])


def tables(view: ChatView, start: int = 0) -> list[QTextTable]:
    found, block = [], view.document().findBlock(start)
    while block.isValid():
        t = QTextCursor(block).currentTable()
        if t is not None and t not in found:
            found.append(t)
        block = block.next()
    return found


def cell_text(table: QTextTable) -> str:
    cur = table.cellAt(0, 0).firstCursorPosition()
    cur.setPosition(table.cellAt(0, 0).lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
    return cur.selectedText().replace("\u2029", "\n")


def cell_formats(table: QTextTable) -> list:
    cur, fmts = table.cellAt(0, 0).firstCursorPosition(), []
    end = table.cellAt(0, 0).lastCursorPosition().position()
    while cur.position() < end:
        cur.movePosition(QTextCursor.MoveOperation.NextCharacter)
        fmts.append(cur.charFormat())
    return fmts


def anchors(view: ChatView) -> list[tuple[str, int]]:
    """(href, a document position inside it) of every link of the code boxes and the text, in
    document order (a saved message's own links, msg:, are its header's, not its text's)."""
    out, block = [], view.document().begin()
    while block.isValid():
        for it in block:
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().anchorHref() and \
                    not frag.charFormat().anchorHref().startswith("msg:"):
                out.append((frag.charFormat().anchorHref(), frag.position() + frag.length() // 2))
        block = block.next()
    return out


def carets(view: ChatView, start: int, end: int | None = None) -> list[tuple[str, int, int]]:
    """(text, x, y) of every non-empty block from `start` (to `end`), where it is
    drawn in the document (whatever the scrolling)."""
    out, block = [], view.document().findBlock(start)
    dy = view.verticalScrollBar().value()
    while block.isValid() and (end is None or block.position() < end):
        if block.text().strip():
            r = view.cursorRect(QTextCursor(block))
            out.append((block.text().strip(), r.x(), r.y() + dy))
        block = block.next()
    return out


def test_a_closed_fence_is_rendered_while_the_open_tail_stays_plain(view):
    view.begin_live("waiting")
    stream(view, "Here is code:\n\n```python\nprint('hi')\nx = [1, 2]\n```\nNow **bold")
    (box,) = tables(view, view._live_start)
    assert cell_text(box) == "print('hi')\nx = [1, 2]"
    fmts = cell_formats(box)
    assert all("monospace" in (f.fontFamilies() or []) for f in fmts)
    assert len({f.foreground().color().name() for f in fmts}) > 1, "highlighted once finished"
    last = view.document().lastBlock()
    assert last.text() == "Now **bold", "the open block is shown as typed, Markdown and all"
    assert QTextCursor(last).currentTable() is None and last.charFormat().fontWeight() < 600
    assert view.live_renders >= 2 and any(h.startswith("copy:") for h, _ in anchors(view))


def test_an_open_fence_streams_in_a_code_box_that_stays_put_when_it_closes(view):
    view.begin_live("waiting")
    stream(view, "Intro\n\n```python\ndef f(x):\n    return x\n\nprint(f(1))\n``")
    (box,) = tables(view, view._live_start)
    assert cell_text(box) == "def f(x):\n    return x\n\nprint(f(1))", "the half closing fence is held back"
    assert all("monospace" in (f.fontFamilies() or []) for f in cell_formats(box))
    assert not any(h.startswith("copy:") for h, _ in anchors(view)), "no Copy for code not yet whole"
    lay = view.document().documentLayout()
    rect, text, lines = lay.frameBoundingRect(box), cell_text(box), carets(view, view._live_start)
    stream(view, "`\nAfter it.")
    (closed,) = tables(view, view._live_start)
    assert cell_text(closed) == text
    assert lay.frameBoundingRect(closed) == rect, "the box neither moves nor resizes"
    assert carets(view, view._live_start)[: len(lines)] == lines
    assert len({f.foreground().color().name() for f in cell_formats(closed)}) > 1


def test_an_open_paragraph_does_not_move_when_it_is_rendered(view):
    view.begin_live("waiting")

    def where(word):
        return view.cursorRect(view.document().find(word, view._live_start))

    stream(view, "First paragraph,\nits second line")
    before = where("First"), where("second")
    assert view.document().lastBlock().text() == "its second line", "still plain text"
    stream(view, "\n\nNext\n")
    assert view.live_renders == 1 and view.document().lastBlock().text() == "Next"
    assert (where("First"), where("second")) == before


def test_copy_on_a_live_rendered_code_block_puts_the_exact_code_on_the_clipboard(view, qtbot):
    view.add_message(LiveMessage("assistant", "```\nearlier\n```"))
    code = 'if a < b:\n\tprint("<b>&amp;</b>")   \n\n# done\n'
    view.begin_live("waiting")
    stream(view, "First:\n\n```sh\nls\n```\n\nSecond:\n\n```python\n" + code + "```\nand then", step=5)
    live = [(h, p) for h, p in anchors(view) if p > view._live_start]
    assert len(live) == 2
    href, pos = live[1]
    cur = QTextCursor(view.document())
    cur.setPosition(pos)
    point = view.cursorRect(cur).center() + QPoint(1, 0)
    assert view.anchorAt(point) == href
    QGuiApplication.clipboard().clear()
    with qtbot.waitSignal(view.copied, timeout=2000) as got:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert got.args == [code] and QGuiApplication.clipboard().text() == code


def test_the_finished_message_looks_as_the_live_one_did(view):
    """Pixel for pixel, down to the open block, which end_live renders for the first time."""
    view.begin_live("waiting")
    stream(view, MIXED + "last para")
    tail = QTextCursor(view.document())
    tail.setPosition(view._live_tail)
    rows = view.cursorRect(tail).top()
    assert view.live_renders > 10 and rows > 400
    live = view.viewport().grab().toImage()
    view.end_live(LiveMessage("assistant", MIXED + "last para"))
    final = view.viewport().grab().toImage()
    assert live.copy(0, 0, live.width(), rows) == final.copy(0, 0, final.width(), rows)


def test_copy_numbers_stay_whole_after_the_reply_is_rendered_again(view):
    view.add_message(LiveMessage("assistant", "```\nearlier\n```"))
    view.begin_live("waiting")
    stream(view, "```\none\n```\n\n```\ntwo\n```\n\nmore")
    assert len(anchors(view)) == 3
    view.end_live(LiveMessage("assistant", "```\none\n```\n\n```\ntwo\n```\n\nmore"))
    links = anchors(view)
    numbers = [int(h.split(":")[1]) for h, _ in links]
    assert len(set(numbers)) == 3 and sorted(view._codes) == sorted(numbers), "no stale live numbers"
    assert [view._codes[n] for n in numbers] == ["earlier\n", "one\n", "two\n"]
    assert [cell_text(t) for t in tables(view)] == ["earlier", "one", "two"]


def test_marking_earlier_messages_mid_stream_keeps_the_rendered_live_blocks_in_place(view):
    msgs = [LiveMessage(role, f"{role} message {i}") for i in range(2) for role in ("user", "assistant")]
    for m in msgs:
        view.add_message(m)
    view.begin_live("waiting")
    stream(view, "para one\n\n```\nkode_x\n```\nmore")
    for i in range(3):
        msgs[i].out_of_context = True
        view.update_message(i, msgs[i])
    stream(view, " text\n\n- item\n")
    text = view.toPlainText()
    assert text.count("out of context") == 3
    assert text.count("para one") == 1 and text.count("kode_x") == 1 and text.count("more text") == 1
    assert text.rstrip().endswith("- item")
    view.end_live(LiveMessage("assistant", "para one\n\n```\nkode_x\n```\nmore text\n\n- item\n"))
    text = view.toPlainText()
    assert text.count("para one") == 1 and text.count("more text") == 1 and text.count("out of context") == 3


def test_discarding_the_live_reply_removes_its_rendered_blocks_and_copy_numbers(view):
    view.add_message(LiveMessage("assistant", "```\nkept\n```"))
    before, codes = view.toPlainText(), dict(view._codes)
    view.begin_live("waiting")
    stream(view, "| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ngone\n```\n\n```py\nopen")
    assert len(tables(view)) == 4
    view.discard_live()
    assert view.toPlainText() == before and view._codes == codes and len(tables(view)) == 1


def test_the_waiting_line_gives_way_to_the_first_text(view):
    view.begin_live("waiting for the first token… 0.3 s")
    assert "waiting for the first token" in view.toPlainText()
    view.live_append("```")
    view.live_append("py\nx")
    assert "waiting" not in view.toPlainText() and cell_text(tables(view, view._live_start)[0]) == "x"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(split_text())
def test_any_reply_in_any_deltas_shows_its_boxes_and_ends_as_a_fresh_render(view, case):
    text, deltas = case
    view.clear_messages()
    view.begin_live("waiting")
    for d in deltas:
        view.live_append(d)
    blocks = view._blocks
    kinds = [t.type for t in MD.parse(blocks.committed)]
    boxes = kinds.count("fence") + kinds.count("code_block") + kinds.count("table_open")
    assert len(tables(view)) == boxes + (blocks.open_fence is not None)
    view.end_live(LiveMessage("assistant", text))
    fresh = ChatView()
    fresh.resize(view.size())
    fresh.add_message(LiveMessage("assistant", text))
    numbers = re.compile(r"copy:\d+")  # never reused, so a live reply's used some up
    assert numbers.sub("copy:", fresh.toHtml()) == numbers.sub("copy:", view.toHtml()), \
        "nothing of the live reply is left"
    fresh.deleteLater()


def test_a_real_markdown_reply_renders_its_finished_blocks_as_it_streams(qtbot, make_window):
    """The bundled model, shown a Markdown answer in an earlier turn, writes one of its own."""
    win = make_window(small_config(streaming=True, max_tokens=200))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    q, a = MARKDOWN_SHOT
    win.flow.new_chat(LiveConversation(messages=[LiveMessage("user", q), LiveMessage("assistant", a)]))
    view, seen, dangling, seen_before_end = win.view, [], [], {}
    orig_append, orig_end = view.live_append, view.end_live

    def append(text):
        orig_append(text)
        seen.append(text)
        dangling.extend(h for h, _ in anchors(view) if int(h.split(":")[1]) not in view._codes)

    def end(msg):
        seen_before_end["carets"] = carets(view, view._live_start, view._live_tail)
        seen_before_end["start"] = view._live_start
        orig_end(msg)

    view.live_append, view.end_live = append, end
    msg = ask(qtbot, win, MARKDOWN_PROMPT)
    shown = "".join(seen)
    assert msg.stats.decode_tokens == 200 and shown.strip() and shown.strip() in msg.content
    assert not dangling, "every Copy link drawn mid-stream copies a known block"
    whole_lines = shown[: shown.rfind("\n") + 1]
    finished = [t for t in MD.parse(whole_lines) if t.level == 0 and t.map and t.nesting >= 0][:-1]
    if finished:
        assert view.live_renders > 0, "blocks finished mid-stream were rendered mid-stream"
    fences = sum(t.type in ("fence", "code_block") for t in MD.parse(msg.content)) + 1  # the example's own
    assert len(view._codes) == fences == len(anchors(view)), "the live copies went with the live reply"
    before = seen_before_end["carets"]
    after = carets(view, seen_before_end["start"])[: len(before)]
    # The saved reply's header gains its links (Edit, Fork, Delete) after its label: same place.
    # Only the header line is cut at its links: a code box's own line ("python \xa0Copy") stays whole.
    head, *body = after
    assert [(head[0].split("\xa0")[0].strip(), *head[1:]), *body] == before, "no jump at the end"
