"""The documents a conversation was given, kept once per text.

A user message names its attachments by the hash of their extracted text; the text itself is
kept here, once however many conversations or turns attach it, so a conversation reopens (and
exports, and imports elsewhere) with the words the model read even when the file has moved,
changed or gone. A loaded conversation carries the texts of the attachments on any of its
branches (`StoredConversation.documents`, as the JSON transcript writes them), and an imported
one brings its own in the same transaction as its messages.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.engine.message import Attachment, DocsUse
from app.history.connection import MAX_ID, StoreBase
from app.history.doc_rows import attachments_json, docs_json
from app.history.errors import StoreError
from app.history.records import StoredConversation

log = logging.getLogger("llamadesk.store")


class DocumentLike(Protocol):
    """What `put_document` keeps: app.docs.extract.Extracted has these, and so does StoredDocument."""

    @property
    def sha256(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def pages(self) -> int: ...
    @property
    def page_starts(self) -> Sequence[int]: ...


@dataclass(frozen=True)
class StoredDocument:
    sha256: str
    name: str
    kind: str
    pages: int
    text: str
    page_starts: tuple[int, ...] = ()

    def to_json(self) -> dict:
        """The transcript's form (its key, the hash, is outside)."""
        return {"name": self.name, "kind": self.kind, "pages": self.pages, "text": self.text,
                "page_starts": list(self.page_starts)}

    @classmethod
    def from_json(cls, sha256: str, d: dict) -> StoredDocument:
        return cls(sha256, d["name"], d["kind"], int(d.get("pages") or 0), d["text"],
                   tuple(int(p) for p in d.get("page_starts") or ()))


def _starts(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in json.loads(text)) if text else ()
    except (ValueError, TypeError) as e:
        log.warning("a document's stored page starts cannot be read (%s); read as one page", e)
        return ()


def _put(c, doc: DocumentLike, now: float) -> None:
    c.execute("INSERT INTO documents (sha256, name, kind, pages, text, page_starts, created_at) "
              "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256) DO NOTHING",
              (doc.sha256, doc.name, doc.kind, int(doc.pages), doc.text,
               json.dumps(list(doc.page_starts)) if doc.page_starts else None, now))


def attached_shas(messages: Iterable) -> list[str]:
    """The hashes the messages' attachments name, each once, first seen first."""
    seen: dict[str, None] = {}
    for m in messages:
        for a in m.attachments:
            seen.setdefault(a.sha256, None)
    return list(seen)


class DocumentRows(StoreBase):
    def put_document(self, doc: DocumentLike) -> None:
        """Keep a document's text under its hash; one already kept stays as it is (the same hash
        is the same text)."""
        with self._write() as c:
            _put(c, doc, time.time())

    def document(self, sha256: str) -> StoredDocument | None:
        """The text kept under `sha256`, with its name, kind and pages; None when none is."""
        with self._read() as c:
            row = c.execute("SELECT sha256, name, kind, pages, text, page_starts FROM documents "
                            "WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None:
            return None
        return StoredDocument(row[0], row[1], row[2], row[3], row[4], _starts(row[5]))

    def set_attachments(self, msg_id: int, attachments: Sequence[Attachment]) -> None:
        """A saved question's documents (its text kept apart: the user's words alone)."""
        self._set(msg_id, "attachments", "user", attachments_json(tuple(attachments)))

    def set_docs(self, msg_id: int, docs: DocsUse | None) -> None:
        """What documents a saved reply was given, whole or retrieved, and its sources."""
        self._set(msg_id, "docs", "assistant", docs_json(docs))

    def _set(self, msg_id: int, column: str, role: str, value: str | None) -> None:
        with self._write() as c:
            row = c.execute("SELECT role FROM messages WHERE id = ?", (msg_id,)).fetchone() \
                if 1 <= msg_id <= MAX_ID else None
            if row is None:
                raise StoreError(self.path, f"no message with id {msg_id}")
            if row[0] != role:
                raise ValueError(f"message {msg_id} is a {row[0]} message; only a {role} message "
                                 f"has {column}")
            c.execute(f"UPDATE messages SET {column} = ? WHERE id = ?", (value, msg_id))

    def get_conversation(self, conv_id: int) -> StoredConversation:
        conv = super().get_conversation(conv_id)  # type: ignore[misc]
        shas = attached_shas(conv.tree or conv.messages)
        if shas:
            with self._read() as c:
                rows = c.execute(
                    f"SELECT sha256, name, kind, pages, text, page_starts FROM documents "
                    f"WHERE sha256 IN ({', '.join('?' * len(shas))})", shas).fetchall()
            conv.documents = {r[0]: StoredDocument(r[0], r[1], r[2], r[3], r[4], _starts(r[5])).to_json()
                              for r in rows}
        return conv

    def import_conversation(self, conv: StoredConversation) -> int:
        """The documents first: kept once per hash, they stay if the messages then fail."""
        docs = [StoredDocument.from_json(sha, d) for sha, d in (conv.documents or {}).items()]
        if docs:
            now = time.time()
            with self._write() as c:
                for d in docs:
                    _put(c, d, now)
        return super().import_conversation(conv)  # type: ignore[misc]
