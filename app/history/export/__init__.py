"""Transcripts out of the store: Markdown, JSON, HTML and plain text.

Every format carries each reply's stats (the same ReplyStats the gauges
showed): compact one-liners in Markdown and text, a full table in HTML, every
field in JSON. Files are written atomically. JSON always carries the whole
tree of branches; Markdown, HTML and text write the path shown, or with
`all_branches` every branch (app.history.export.common).
"""

from __future__ import annotations

from pathlib import Path

from app.history import transcript
from app.history.export import html, markdown, text, writer
from app.history.records import StoredConversation

FORMATS = ("md", "json", "html", "txt")
_BY_SUFFIX = {".md": "md", ".markdown": "md", ".json": "json", ".html": "html", ".htm": "html",
              ".txt": "txt", ".text": "txt"}
_RENDER = {"md": markdown.render, "html": html.render, "txt": text.render}  # and JSON: transcript


def format_for(path: str | Path) -> str | None:
    """The format a file name asks for by its extension, or None."""
    return _BY_SUFFIX.get(Path(path).suffix.lower())


def render(conv: StoredConversation, fmt: str, all_branches: bool = False) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "json":
        return transcript.dumps(conv)  # every branch, always
    return _RENDER[fmt](conv, all_branches)


def export(conv: StoredConversation, path: str | Path, fmt: str | None = None,
           all_branches: bool = False) -> Path:
    """Write `conv` to `path` atomically; the format defaults to the extension's."""
    if str(path) == "":
        raise ValueError("the export file name is empty")
    fmt = fmt or format_for(path)
    if fmt is None:
        raise ValueError(f"{path}: cannot tell the format from the extension; "
                         f"choose one of {', '.join(FORMATS)}")
    return writer.write_text(path, render(conv, fmt, all_branches))
