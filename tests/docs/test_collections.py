"""A folder as a collection: incremental re-index, cancel, and the bad inputs a real folder has."""

from __future__ import annotations

import os
import threading
import time

import pytest

from app.docs.collections import index_folder
from app.docs.index import DocsIndex, DocsIndexError
from tests.docs import files


def _folder(root):
    (root / "sub").mkdir(parents=True)
    (root / "INSTALL.md").write_text(files.MARKDOWN, encoding="utf-8")
    (root / "sub" / "tea.html").write_text(files.HTML, encoding="utf-8")
    (root / "sub" / "tiny.py").write_text(files.CODE, encoding="utf-8")
    files.pdf(root / "story.pdf")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 100)  # not a kind of document: skipped
    (root / ".hidden.md").write_text("secret hidden words")
    return root


def test_index_then_touch_edit_delete(tmp_path):
    root = _folder(tmp_path / "docs")
    seen = []
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        r = index_folder(ix, root, "notes", progress=seen.append)
        assert (r.added, r.updated, r.unchanged, r.deleted, r.failed) == (4, 0, 0, [], [])
        assert seen[-1].files_done == seen[-1].files_total == 4 and seen[-1].pages == 6  # a 3-page PDF
        info = ix.collections()[0]
        assert (info.name, info.files, info.pages, info.missing) == ("notes", 4, 6, 0) and info.chunks > 4
        assert ix.search("secret hidden", collection="notes") == []
        assert ix.search("Vlieland ferry", collection="notes")[0].where == "page 2"

        r = index_folder(ix, root, "notes")
        assert (r.added, r.updated, r.unchanged) == (0, 0, 4)

        later = time.time() + 10
        os.utime(root / "INSTALL.md", (later, later))  # touched, not edited: same hash
        (root / "sub" / "tiny.py").write_text(files.CODE + "\n\ndef marmalade():\n    return 'orange'\n")
        (root / "story.pdf").unlink()
        assert ix.collections()[0].missing == 1
        r = index_folder(ix, root, "notes")
        assert (r.added, r.updated, r.unchanged) == (0, 1, 2)  # the touched one keeps its passages
        assert r.deleted == [str((root / "story.pdf").resolve())]
        assert ix.search("marmalade", collection="notes")[0].document == "tiny.py"
        assert ix.search("Vlieland ferry", collection="notes") == []
        assert ix.conn.execute("select count(*) from texts").fetchone()[0] == 3  # old texts dropped
        assert ix.collections()[0].missing == 0


def test_cancel_midway_keeps_what_was_done(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(30):
        (root / f"note{i:02}.md").write_text(f"# Note {i}\n\nword{i} appears here.\n")
    cancel = threading.Event()

    def stop_after_ten(p):
        if p.files_done == 10:
            cancel.set()

    with DocsIndex.open(tmp_path / "docs.db") as ix:
        r = index_folder(ix, root, "many", progress=stop_after_ten, cancel=cancel)
        assert r.cancelled and r.added == 10 and r.deleted == []
        assert ix.search("word3")[0].document == "note03.md"
        r = index_folder(ix, root, "many")
        assert not r.cancelled and (r.added, r.unchanged) == (20, 10)


def test_bad_files_are_each_one_line_and_the_rest_indexed(tmp_path):
    root = _folder(tmp_path / "docs")
    with open(root / "huge.txt", "wb") as f:
        f.truncate(500 << 20)
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    (root / "binary.txt").write_bytes(b"\x7fELF" + b"\x00" * 64)
    files.pdf(root / "locked.pdf", password="pw")
    files.scanned_pdf(root / "scan.pdf")
    os.symlink(root / "loop-b.md", root / "loop-a.md")
    os.symlink(root / "loop-a.md", root / "loop-b.md")
    os.symlink(root, root / "sub" / "up")  # a folder loop
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        r = index_folder(ix, root, "notes")
        assert r.added == 4
        why = dict(r.failed)
        assert all("\n" not in w for w in why.values())
        assert "too large" in why[str(root.resolve() / "huge.txt")]
        assert "not UTF-8" in why[str(root.resolve() / "latin1.txt")]
        assert "a program" in why[str(root.resolve() / "binary.txt")]
        assert "encrypted PDF" in why[str(root.resolve() / "locked.pdf")]
        assert "no text layer" in why[str(root.resolve() / "scan.pdf")]
        assert "symlink loop" in why[str(root.resolve() / "loop-a.md")]
        assert "symlink loop" in why[str(root.resolve() / "sub" / "up")]
        assert len(r.failed) == 8


def test_too_many_files_is_refused_before_anything_changes(tmp_path):
    """100k files cost minutes to make here; the same bound at 1,000 with 1,500 empty files."""
    root = tmp_path / "flood"
    root.mkdir()
    for i in range(1500):
        (root / f"{i}.txt").touch()
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        t0 = time.monotonic()
        with pytest.raises(DocsIndexError) as e:
            index_folder(ix, root, "flood", max_files=1000)
        assert time.monotonic() - t0 < 5
        assert "more than 1,000 documents" in str(e.value) and "\n" not in str(e.value)
        assert ix.collections() == []


def test_names_roots_and_removal(tmp_path):
    a = _folder(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    (b / "x.md").write_text("# X\n\nshared words\n")
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        index_folder(ix, a, "a")
        with pytest.raises(DocsIndexError, match="already indexes"):
            index_folder(ix, b, "a")
        index_folder(ix, b, "b")
        with pytest.raises(Exception, match="not a folder"):
            index_folder(ix, a / "INSTALL.md", "c")
        ix.remove_collection("a")
        assert [c.name for c in ix.collections()] == ["b"]
        assert ix.search("Vlieland") == [] and ix.search("shared words")[0].collection == "b"
        with pytest.raises(DocsIndexError, match="no collection named"):
            ix.remove_collection("a")
