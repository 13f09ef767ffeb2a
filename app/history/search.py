"""Search over message text: the trigram index when SQLite has it, else LIKE.

Both paths promise the same thing, a case-insensitive substring match, so
the search box behaves alike whichever SQLite the user's Python ships.

A thinking model's reasoning is searched only when asked (`include_reasoning`).
It is folded away where a reply is shown, often several times the answer's
length, and full of what the model tried and dropped: searched by default it
would bury the answers the user read under hits in text they never opened.
Asked for, a hit in the reasoning alone says so (`SearchHit.in_reasoning`) and
its snippet comes from there.
"""

from __future__ import annotations

import re

from app.history import migrations
from app.history.connection import StoreBase
from app.history.records import SearchHit


class MessageSearch(StoreBase):
    def search(self, query: str, limit: int = 100, *, include_reasoning: bool = False) -> list[SearchHit]:
        """Messages containing `query` (case-insensitive substring) in their text, or with
        `include_reasoning` in their reasoning too; newest conversations first."""
        q = query.strip()
        if not q:
            return []
        base = ("SELECT m.id, m.conversation_id, m.role, m.content, c.title, m.reasoning FROM {src} "
                "JOIN conversations c ON c.id = m.conversation_id "
                "WHERE {cond} AND c.deleted_at IS NULL ORDER BY c.updated_at DESC, m.id LIMIT ?")
        if self.fts and len(q) >= 3:  # trigrams need three characters
            sql = base.format(src=f"{migrations.FTS_TABLE} f JOIN messages m ON m.id = f.rowid",
                              cond=f"{migrations.FTS_TABLE} MATCH ?")
            phrase = '"' + q.replace('"', '""') + '"'
            args: tuple = (phrase if include_reasoning else f"content : {phrase}",)
        else:
            like = "%" + re.sub(r"([%_\\])", r"\\\1", q) + "%"
            cond = "m.content LIKE ? ESCAPE '\\'"
            if include_reasoning:
                sql = base.format(src="messages m", cond=f"({cond} OR m.reasoning LIKE ? ESCAPE '\\')")
                args = (like, like)
            else:
                sql, args = base.format(src="messages m", cond=cond), (like,)
        with self._read() as c:
            rows = c.execute(sql, (*args, limit)).fetchall()
        return [_hit(r, q) for r in rows]


def _hit(r, q: str) -> SearchHit:
    """A hit's snippet from its text; from its reasoning when only the reasoning matched."""
    in_reasoning = bool(r[5]) and not _contains(r[3], q)
    return SearchHit(r[1], r[4], r[0], r[2], snippet(r[5] if in_reasoning else r[3], q), in_reasoning)


def _contains(text: str, query: str) -> bool:
    return re.search(re.escape(query), text, re.IGNORECASE) is not None


def snippet(text: str, query: str, before: int = 40, after: int = 80) -> str:
    """One line of `text` around the first match of `query`, for a search result."""
    m = re.search(re.escape(query), text, re.IGNORECASE)
    start = m.start() if m else 0
    lo, hi = max(0, start - before), min(len(text), start + len(query) + after)
    out = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + out + ("…" if hi < len(text) else "")
