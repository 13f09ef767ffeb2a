"""Each kind of document extracted from a real file, and each bad input refused in one line."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from app.docs.extract import MAX_BYTES, DocumentError, extract, supported
from tests.docs import files


def _one_line(e: pytest.ExceptionInfo, path) -> str:
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "Traceback" not in msg
    return msg


def test_pdf_pages_and_their_starts(tmp_path):
    ex = extract(files.pdf(tmp_path / "story.pdf"))
    assert ex.kind == "pdf" and ex.pages == 3 and len(ex.page_starts) == 3 and ex.page_starts[0] == 0
    for i, words in enumerate(("lighthouse keeper", "ferry to Vlieland", "closed the island road")):
        start = ex.page_starts[i]
        end = ex.page_starts[i + 1] if i + 1 < 3 else len(ex.text)
        assert words in ex.text[start:end]
        assert all(words not in ex.text[s:e] for j, (s, e) in enumerate(
            zip(ex.page_starts, [*ex.page_starts[1:], len(ex.text)])) if j != i)
    assert ex.sha256 == hashlib.sha256(ex.text.encode("utf-8")).hexdigest()


def test_docx_keeps_its_headings_as_markdown(tmp_path):
    ex = extract(files.docx(tmp_path / "guide.docx"))
    assert ex.kind == "docx"
    assert "# Field Guide" in ex.text and "## Waders" in ex.text and "oystercatcher" in ex.text


def test_html_to_markdown_without_the_site_navigation(tmp_path):
    p = tmp_path / "tea.html"
    p.write_text(files.HTML, encoding="utf-8")
    ex = extract(p)
    assert ex.kind == "html" and "# Brewing tea" in ex.text and "## Green tea" in ex.text
    assert "eighty degrees" in ex.text
    assert "Menu everywhere" not in ex.text and "Copyright nobody" not in ex.text


def test_markdown_and_code_and_text_as_they_are(tmp_path):
    md = tmp_path / "INSTALL.md"
    md.write_text(files.MARKDOWN, encoding="utf-8")
    code = tmp_path / "tiny.py"
    code.write_text(files.CODE, encoding="utf-8")
    assert extract(md).text == files.MARKDOWN and extract(md).kind == "markdown"
    assert extract(code).text == files.CODE and extract(code).kind == "code"
    txt = tmp_path / "notes.txt"
    txt.write_bytes(b"one\r\ntwo\r\n")
    assert extract(txt).text == "one\ntwo\n" and extract(txt).kind == "text"
    assert supported("a/Makefile") and supported("x.RS") and not supported("photo.jpg")


@pytest.mark.parametrize("enc,bom", [("utf-8-sig", b""), ("utf-16", b"")])
def test_text_with_a_bom(tmp_path, enc, bom):
    p = tmp_path / f"{enc}.txt"
    p.write_bytes(bom + "Größe: ½ — 東京".encode(enc))
    assert extract(p).text == "Größe: ½ — 東京"


def test_encrypted_pdf(tmp_path):
    p = files.pdf(tmp_path / "locked.pdf", password="s3cret")
    with pytest.raises(DocumentError) as e:
        extract(p)
    assert "encrypted PDF" in _one_line(e, p)


def test_scanned_pdf_has_no_text_layer(tmp_path):
    p = files.scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(DocumentError) as e:
        extract(p)
    assert "no text layer; OCR is not included" in _one_line(e, p)


def test_a_500_mb_file_is_refused_without_being_read(tmp_path):
    p = tmp_path / "huge.txt"
    with open(p, "wb") as f:
        f.truncate(500 << 20)  # sparse: nothing written
    t0 = time.monotonic()
    with pytest.raises(DocumentError) as e:
        extract(p)
    assert time.monotonic() - t0 < 1
    msg = _one_line(e, p)
    assert "too large: 500 MB" in msg and f"{MAX_BYTES >> 20} MB" in msg


def test_binary_renamed_txt(tmp_path):
    png = tmp_path / "photo.txt"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(200))
    blob = tmp_path / "blob.md"
    blob.write_bytes(b"abc\x00\x01\x02def" * 10)
    with pytest.raises(DocumentError) as e:
        extract(png)
    assert "a PNG image" in _one_line(e, png)
    with pytest.raises(DocumentError) as e:
        extract(blob)
    assert "binary data" in _one_line(e, blob)


def test_non_utf8_text_is_named_not_garbled(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("café au lait".encode("latin-1"))
    with pytest.raises(DocumentError) as e:
        extract(p)
    msg = _one_line(e, p)
    assert "not UTF-8 text" in msg and "0xe9" in msg and "UTF-16" in msg


def test_unopenable_and_missing_files_are_not_called_damaged(tmp_path):
    gone = tmp_path / "gone.md"
    with pytest.raises(DocumentError) as e:
        extract(gone)
    assert "cannot be opened" in _one_line(e, gone) and "damaged" not in str(e.value)
    locked = tmp_path / "locked.md"
    locked.write_text("secret")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):  # root reads anything: the refusal cannot be made here
            assert extract(locked).text == "secret"
        else:
            with pytest.raises(DocumentError) as e:
                extract(locked)
            assert "cannot be opened" in _one_line(e, locked)
    finally:
        locked.chmod(0o600)
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(DocumentError) as e:
        extract(fifo)  # must not wait for a writer
    assert "not a regular file" in _one_line(e, fifo)


def test_a_damaged_pdf_and_a_fake_docx(tmp_path):
    bad = tmp_path / "cut.pdf"
    bad.write_bytes(files.pdf(tmp_path / "whole.pdf").read_bytes()[:300])
    with pytest.raises(DocumentError) as e:
        extract(bad)
    assert "PDF" in _one_line(e, bad)
    fake = tmp_path / "fake.docx"
    fake.write_text("not a zip")
    with pytest.raises(DocumentError) as e:
        extract(fake)
    assert "not a DOCX" in _one_line(e, fake)
