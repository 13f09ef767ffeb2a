"""Search over message text: the trigram index when SQLite has it, else LIKE.

Both paths promise the same thing, a case-insensitive substring match, so
the search box behaves alike whichever SQLite the user's Python ships.
"""

from __future__ import annotations

import re

from app.history import migrations
from app.history.connection import StoreBase
from app.history.records import SearchHit


class MessageSearch(StoreBase):
    def search(self, query: str, limit: int = 100) -> list[SearchHit]:
        """Messages containing `query` (case-insensitive substring), newest conversations first."""
        q = query.strip()
        if not q:
            return []
        base = ("SELECT m.id, m.conversation_id, m.role, m.content, c.title FROM {src} "
                "JOIN conversations c ON c.id = m.conversation_id "
                "WHERE {cond} AND c.deleted_at IS NULL ORDER BY c.updated_at DESC, m.id LIMIT ?")
        if self.fts and len(q) >= 3:  # trigrams need three characters
            sql = base.format(src=f"{migrations.FTS_TABLE} f JOIN messages m ON m.id = f.rowid",
                              cond=f"{migrations.FTS_TABLE} MATCH ?")
            arg = '"' + q.replace('"', '""') + '"'
        else:
            sql = base.format(src="messages m", cond="m.content LIKE ? ESCAPE '\\'")
            arg = "%" + re.sub(r"([%_\\])", r"\\\1", q) + "%"
        with self._read() as c:
            rows = c.execute(sql, (arg, limit)).fetchall()
        return [SearchHit(r[1], r[4], r[0], r[2], snippet(r[3], q)) for r in rows]


def snippet(text: str, query: str, before: int = 40, after: int = 80) -> str:
    """One line of `text` around the first match of `query`, for a search result."""
    m = re.search(re.escape(query), text, re.IGNORECASE)
    start = m.start() if m else 0
    lo, hi = max(0, start - before), min(len(text), start + len(query) + after)
    out = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + out + ("…" if hi < len(text) else "")
