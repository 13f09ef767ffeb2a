"""A document's text, from the file a person picked, or one line saying why there is none.

Every kind ends as one string with a hash, so a conversation can keep the text itself (not a
path that may move) and the index can tell an edited file from a touched one. PDFs keep where
each page starts, so a passage can be named by its page. DOCX and HTML go through markitdown
to Markdown, so their headings survive for cutting passages by structure; PDFs go through
pypdf page by page: markitdown's PDF path needs pdfminer.six and pdfplumber besides, reads
the same text many times slower, and marks pages only with form feeds.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from app.errors import FileProblem
from app.regular_files import read_bytes

KINDS = ("pdf", "docx", "html", "markdown", "code", "text")
MAX_BYTES = 100 << 20  # a document larger than this is almost surely not one a person meant to ask about

_EXT = {".pdf": "pdf", ".docx": "docx", ".html": "html", ".htm": "html", ".xhtml": "html",
        ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
        ".txt": "text", ".text": "text", ".rst": "text", ".log": "text", ".csv": "text", ".tsv": "text",
        ".org": "text", ".tex": "text"}
_CODE = ("py pyi js mjs ts tsx jsx c h cc cpp hpp cxx rs go java kt kts swift rb php pl lua sh bash zsh "
         "fish ps1 sql r jl scala cs fs hs ml ex exs erl clj dart vue svelte css scss less json jsonc "
         "toml yaml yml ini cfg conf xml cmake mk gradle proto graphql zig nim")
_EXT.update({"." + e: "code" for e in _CODE.split()})
_NAMES = {"makefile": "code", "dockerfile": "code", "readme": "text", "license": "text", "copying": "text"}

# Magic numbers of the binary formats most often found under a text name.
_MAGIC = ((b"%PDF-", "a PDF"), (b"PK\x03\x04", "a ZIP archive (or a DOCX/XLSX)"), (b"\x7fELF", "a program"),
          (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
          (b"\x1f\x8b", "gzip data"), (b"BZh", "bzip2 data"), (b"\xfd7zXZ", "xz data"),
          (b"7z\xbc\xaf", "7z data"), (b"SQLite format 3\x00", "an SQLite database"),
          (b"MZ", "a Windows program"),
          (b"\xd0\xcf\x11\xe0", "an old Office file"), (b"GGUF", "a GGUF model"))


class DocumentError(FileProblem):
    """One line naming the file and what is wrong with it as a document."""


@dataclass(frozen=True)
class Extracted:
    name: str
    path: str
    kind: str
    text: str
    sha256: str
    pages: int = 0
    page_starts: tuple[int, ...] = ()


def kind_of(path: str | Path) -> str | None:
    p = Path(path)
    return _EXT.get(p.suffix.lower()) or (_NAMES.get(p.name.lower()) if not p.suffix else None)


def supported(path: str | Path) -> bool:
    return kind_of(path) is not None


def _mb(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MB"


def _read(p: Path) -> bytes:
    """The bytes, refusing a huge file from its size alone (it is never read) and anything not a file."""
    try:
        st = os.stat(p)
    except OSError as e:
        raise DocumentError(p, f"cannot be opened ({why_not_opened(e)})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DocumentError(p, "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise DocumentError(p, "not a regular file")
    if st.st_size > MAX_BYTES:
        raise DocumentError(p, f"too large: {_mb(st.st_size)}; documents are limited to {_mb(MAX_BYTES)}")
    try:
        return read_bytes(p, MAX_BYTES)
    except OSError as e:
        raise DocumentError(p, f"cannot be opened ({why_not_opened(e)})") from None


def why_not_opened(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return "a symlink loop"
    return (e.strerror or str(e)).lower() if e.strerror else str(e)


def _binary(data: bytes) -> str | None:
    """What a file given as text really is, when it is not text at all."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return None  # UTF-16 with its BOM: NUL bytes belong there
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    if b"\x00" in data[:8192]:
        return "binary data"
    return None


def _decode(p: Path, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        enc = "utf-8-sig"
    elif data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        enc = "utf-16"
    else:
        enc = "utf-8"
    try:
        text = data.decode(enc)
    except UnicodeDecodeError as e:
        what = "UTF-16" if enc == "utf-16" else "UTF-8"
        raise DocumentError(p, f"not {what} text (byte 0x{data[e.start]:02x} at offset {e.start}; "
                               "UTF-8, UTF-8 with a BOM and UTF-16 with a BOM were tried): "
                               "save it as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def extract(path: str | Path) -> Extracted:
    """The text of one document; DocumentError (one line) for anything that has none to give."""
    p = Path(path)
    kind = kind_of(p)
    if kind is None:
        raise DocumentError(p, f"not a kind of document LlamaDesk reads ({p.suffix or 'no extension'}); "
                               "it reads PDF, DOCX, HTML, Markdown, text and source code")
    data = _read(p)
    page_starts: tuple[int, ...] = ()
    if kind == "pdf":
        text, page_starts = _pdf(p, data)
    elif kind in ("docx", "html"):
        text = _markitdown(p, data, kind)
    else:
        what = _binary(data)
        if what:
            raise DocumentError(p, f"not text: the file holds {what}")
        text = _decode(p, data)
    return Extracted(name=p.name, path=str(p), kind=kind, text=text,
                     sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                     pages=len(page_starts), page_starts=page_starts)


def _pdf(p: Path, data: bytes) -> tuple[str, tuple[int, ...]]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    if not data.startswith(b"%PDF-") and b"%PDF-" not in data[:1024]:
        raise DocumentError(p, "not a PDF (it does not start as one)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(p, "encrypted PDF: it needs a password; save an unprotected copy to use it")
        parts, starts, at = [], [], 0
        for page in reader.pages:
            t = (page.extract_text() or "").replace("\r\n", "\n").replace("\r", "\n").strip("\n")
            starts.append(at)
            parts.append(t)
            at += len(t) + 2
    except DocumentError:
        raise
    except DependencyError as e:
        raise DocumentError(p, f"encrypted PDF: {e}") from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as e:
        raise DocumentError(p, f"damaged PDF ({_line(e)})") from None
    if not any(t.strip() for t in parts):
        raise DocumentError(p, f"no text layer; OCR is not included ({len(parts)} page(s) of images only)")
    return "\n\n".join(parts), tuple(starts)


_MD = None
# Navigation a site repeats on every page (menus, sidebars, footers) is dropped before conversion.
_BOILER = ("nav", "header", "footer", "script", "style", "noscript")
_BOILER_CLASSES = re.compile(r"\b(sphinxsidebar|related|navigation|navbar|sidebar|footer|breadcrumbs?)\b")


def _markitdown(p: Path, data: bytes, kind: str) -> str:
    global _MD
    from markitdown import MarkItDown, StreamInfo

    if kind == "docx" and not data.startswith(b"PK\x03\x04"):
        raise DocumentError(p, "not a DOCX (a DOCX is a ZIP archive; this is not one)")
    if kind == "html":
        what = _binary(data)
        if what:
            raise DocumentError(p, f"not HTML: the file holds {what}")
        data = _strip_boilerplate(data)
    if _MD is None:
        _MD = MarkItDown(enable_plugins=False)
    try:
        if kind == "docx":
            data = _docx_html(data)
        out = _MD.convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=".html"))
    except Exception as e:  # noqa: BLE001 - markitdown wraps every converter's failure in its own exceptions
        raise DocumentError(p, f"damaged {kind.upper()} ({_line(e)})") from None
    text = (out.text_content or "").replace("\r\n", "\n").strip()
    if not text:
        raise DocumentError(p, f"no text in this {kind.upper()}")
    return text


def _docx_html(data: bytes) -> bytes:
    """DOCX to HTML by mammoth, the converter markitdown's own DOCX path uses. That path first
    rewrites the XML for equations through BeautifulSoup, which (bs4 4.15 with lxml 6) drops the
    namespace prefixes and leaves mammoth no body to find: every DOCX failed."""
    import mammoth

    return mammoth.convert_to_html(io.BytesIO(data)).value.encode("utf-8")


def _strip_boilerplate(data: bytes) -> bytes:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup.find_all(list(_BOILER)):
        tag.decompose()
    for tag in soup.find_all(role="navigation"):
        tag.decompose()
    for tag in soup.find_all(class_=_BOILER_CLASSES):
        tag.decompose()
    for a in soup.find_all("a", class_="headerlink"):  # Sphinx's pilcrow after each heading
        a.decompose()
    return str(soup).encode("utf-8")


def _line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:200]
