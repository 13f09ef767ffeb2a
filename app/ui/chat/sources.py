"""Under a reply given documents: how they went in, its numbered sources, and each passage in place.

The line says whether the documents went in whole (they fit with room for the
answer; their token cost beside) or as retrieved passages, so the user knows
what the model could have read. The sources are numbered as the prompt told
the model to cite them ([n]), each naming its document, its page or heading
and its first words. A click (the view's source_clicked) opens the passage in
its document: app.ui.docs.passage, the whole text scrolled to the passage and
with it selected, so the user reads it in its context.
"""

from __future__ import annotations

import html

from app.engine.message import DOCS_WHOLE, DocsUse, Source
from app.ui.chat.markdown import Theme

SOURCE_SCHEME = "src"  # the view's links on a source: src:MESSAGE_INDEX/N
SNIPPET_CHARS = 110


def headline(docs: DocsUse) -> str:
    """'Documents whole · 3,120 tok' or 'Retrieved 5 passages · 1,840 tok'."""
    tok = f" · {docs.tokens:,} tok" if docs.tokens else ""
    if docs.mode == DOCS_WHOLE:
        return f"Documents whole{tok}"
    n = len(docs.sources)
    return f"Retrieved {n} passage{'s' if n != 1 else ''}{tok}"


def source_line(s: Source) -> str:
    """'guide.pdf · page 3 · “the first words…”' (plain text, as the exports and tests read it)."""
    where = f" · {s.where}" if s.where else ""
    coll = f" ({s.collection})" if s.collection else ""
    snip = " ".join(s.snippet.split())
    if len(snip) > SNIPPET_CHARS:
        snip = snip[:SNIPPET_CHARS - 1].rstrip() + "…"
    return f"{s.document}{coll}{where}" + (f" · “{snip}”" if snip else "")


def sources_html(theme: Theme, docs: DocsUse, index: int) -> str:
    """The block under reply `index` of the view: the headline, then one linked line per source."""
    muted = f"color:{theme.muted};"
    out = [f'<p style="margin-top:6px; margin-bottom:0px; {muted} font-size:small;">'
           f"<b>{html.escape(headline(docs))}</b></p>"]
    for s in docs.sources:
        link = f'href="{SOURCE_SCHEME}:{index}/{s.n}" style="color:{theme.link}; text-decoration:none;"'
        out.append(f'<p style="margin:0px; font-size:small;"><a {link}>'
                   f"[{s.n}]</a> <span style=\"{muted}\">{html.escape(source_line(s))}</span></p>")
    return "".join(out)
