"""Real documents written for the tests: PDFs by fpdf2 (a text layer, encrypted, images only),
DOCX by python-docx, and plain HTML, Markdown and code."""

from __future__ import annotations

from pathlib import Path

PAGES = (
    "Chapter one. The lighthouse keeper wound the clock every evening at dusk.",
    "Chapter two. The harbour master said the ferry to Vlieland leaves at seven fifteen.",
    "Chapter three. Storms in November closed the island road for nine days.",
)


def pdf(path: Path, pages=PAGES, password: str | None = None) -> Path:
    from fpdf import FPDF

    doc = FPDF()
    if password:
        doc.set_encryption(owner_password="owner-" + password, user_password=password)
    doc.set_font("helvetica", size=12)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 8, text)
    doc.output(str(path))
    return path


def scanned_pdf(path: Path, n: int = 2) -> Path:
    """Pages with drawings and no text at all, as a scan without OCR is."""
    from fpdf import FPDF

    doc = FPDF()
    for i in range(n):
        doc.add_page()
        doc.set_fill_color(40 * i, 90, 160)
        doc.rect(20, 20, 120, 80, style="F")
    doc.output(str(path))
    return path


def docx(path: Path) -> Path:
    import docx as python_docx

    d = python_docx.Document()
    d.add_heading("Field Guide", level=1)
    d.add_paragraph("A short guide to the birds of the dunes.")
    d.add_heading("Waders", level=2)
    d.add_paragraph("The oystercatcher nests on open shingle and calls loudly at night.")
    d.add_heading("Songbirds", level=2)
    d.add_paragraph("The skylark sings while climbing high above the grassland.")
    d.save(str(path))
    return path


HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Tea</title></head><body>
<nav><a href="/">Home</a> <a href="/menu">Menu everywhere</a></nav>
<h1>Brewing tea</h1><p>Good tea starts with fresh water.</p>
<h2>Green tea</h2><p>Green tea wants water at eighty degrees for two minutes.</p>
<h2>Black tea</h2><p>Black tea takes boiling water and four minutes.</p>
<footer>Copyright nobody</footer></body></html>
"""

MARKDOWN = """# Install

Read this first.

## Linux

Run `make install` as root; the binary lands in /usr/local/bin.

```sh
./configure --prefix=/usr/local
make
make install
```

## Windows

Double-click the installer and accept the licence.
"""

CODE = '''"""A tiny module."""


def add(a, b):
    """Sum of two numbers."""
    return a + b


def greet(name):
    return f"hello {name}"
'''
