"""The documents index: one SQLite file holding texts, passages, BM25 and vectors.

BM25 (FTS5) is always there, so retrieval works with no embedding model at all; vectors join
it only when one is set, and the two rankings are fused by reciprocal rank (k=60), as GPT4All's
LocalDocs does, so neither score scale has to be trusted against the other. A text is kept and
cut once per hash: the same file in two collections, or attached to ten conversations, is one
set of passages.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app import paths
from app.docs.chunks import chunk
from app.docs.extract import Extracted
from app.docs.schema import SCHEMA, fts_schema
from app.docs.vectors import Vectors
from app.errors import FileProblem, LlamaDeskError

RRF_K = 60
_IN_COLLECTION = "select sha256 from documents where collection = ?"
TOKENIZERS = ("porter unicode61", "trigram")
_STOP = frozenset("a an and are as at be by can do does for from how i if in is it its of on or that the "
                  "this to what when where which who why will with you your".split())


class DocsIndexError(LlamaDeskError):
    """A collection that does not exist, a name taken by another folder: one line."""


@dataclass(frozen=True)
class Hit:
    document: str
    sha256: str
    where: str
    start: int
    end: int
    text: str
    score: float
    collection: str | None
    path: str


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    root: str
    files: int
    pages: int
    chunks: int
    indexed_at: float
    missing: int  # indexed files no longer on disk


class DocsIndex:
    """One open index. A connection is used by one thread at a time (the CLI hands it to its
    worker), hence check_same_thread off."""

    def __init__(self, conn, path: Path, vectors: Vectors, tokenizer: str):
        self.conn = conn
        self.path = path
        self.vectors = vectors
        self.tokenizer = tokenizer
        self._embed: Callable[[list[str]], np.ndarray] | None = None
        self.model_id: str | None = None

    @classmethod
    def open(cls, path: Path | None = None, *, tokenizer: str = "porter unicode61",
             sqlite=sqlite3, use_extension: bool = True) -> DocsIndex:
        """`sqlite` is the DB-API module (the standard one; tests pass pysqlite3 for a build that can
        load sqlite-vec); `tokenizer` applies to a new file only, an existing one keeps its own."""
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer {tokenizer!r}: expected one of {', '.join(TOKENIZERS)}")
        path = Path(path) if path is not None else paths.data_dir() / "docs.db"
        try:
            conn = sqlite.connect(str(path), check_same_thread=False, isolation_level=None)
            conn.execute("pragma journal_mode=wal")
            conn.execute("pragma foreign_keys=on")
            conn.executescript(SCHEMA)
            row = conn.execute("select value from meta where key = 'tokenizer'").fetchone()
            if row is None:
                conn.execute("insert into meta(key, value) values ('tokenizer', ?)", (tokenizer,))
                conn.executescript(fts_schema(tokenizer))
            else:
                tokenizer = row[0]
        except sqlite.Error as e:
            raise FileProblem(path, f"cannot open the documents index ({e})") from None
        return cls(conn, path, Vectors(conn, use_extension), tokenizer)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> DocsIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set_embedder(self, embed: Callable[[list[str]], np.ndarray] | None, model_id: str | None) -> None:
        """Passages added from now on get vectors from `embed`, and search fuses them with BM25."""
        self._embed, self.model_id = embed, model_id

    def embed_missing(self, progress: Callable[[int, int], None] | None = None, batch: int = 16,
                      cancel=None, limit: int = 1 << 30) -> int:
        """Vectors for passages indexed before the model was set; returns how many were made."""
        if self._embed is None or self.model_id is None:
            raise DocsIndexError("no embedding model is set")
        todo = self.vectors.missing(self.model_id, limit)
        for i in range(0, len(todo), batch):
            if cancel is not None and cancel.is_set():
                return i
            part = todo[i:i + batch]
            mat = self._embed([t for _, t in part])
            with self.conn:
                self.conn.execute("begin")
                self.vectors.put(self.model_id, [c for c, _ in part], mat)
            if progress:
                progress(min(i + batch, len(todo)), len(todo))
        return len(todo)

    # Writing

    def add(self, ex: Extracted, collection: str | None = None, *, mtime: float | None = None,
            size: int | None = None) -> int:
        """Passages of the document (cut once per text hash); the document row names it in
        `collection` (keyed by path there) or, with none, stands as an attachment (keyed by hash)."""
        coll = collection or ""
        with self.conn:
            self.conn.execute("begin immediate")
            n = self._add_text(ex)
            old = None
            if coll:
                row = self.conn.execute("select sha256 from documents where collection = ? and path = ?",
                                        (coll, ex.path)).fetchone()
                old = row[0] if row else None
            self.conn.execute(
                "insert into documents(sha256, name, path, kind, pages, mtime, size, collection, indexed_at) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict do update set sha256 = excluded.sha256, "
                "name = excluded.name, path = excluded.path, kind = excluded.kind, pages = excluded.pages, "
                "mtime = excluded.mtime, size = excluded.size, indexed_at = excluded.indexed_at",
                (ex.sha256, ex.name, ex.path, ex.kind, ex.pages, mtime, size, coll, time.time()))
            if old and old != ex.sha256:
                self._drop_text_if_unused(old)
        return n

    def _add_text(self, ex: Extracted) -> int:
        row = self.conn.execute("select count(*) from chunks where sha256 = ?", (ex.sha256,)).fetchone()
        if self.conn.execute("select 1 from texts where sha256 = ?", (ex.sha256,)).fetchone():
            return row[0]
        self.conn.execute("insert into texts(sha256, kind, pages, page_starts, text) values (?, ?, ?, ?, ?)",
                          (ex.sha256, ex.kind, ex.pages, json.dumps(list(ex.page_starts)), ex.text))
        parts = chunk(ex.text, ex.kind, ex.page_starts)
        ids = []
        for seq, c in enumerate(parts):
            cur = self.conn.execute(
                "insert into chunks(sha256, seq, start, end_, where_, text) values (?, ?, ?, ?, ?, ?)",
                (ex.sha256, seq, c.start, c.end, c.where, c.text))
            ids.append(cur.lastrowid)
        if self._embed is not None and self.model_id is not None and parts:
            self.vectors.put(self.model_id, ids, self._embed([c.text for c in parts]))
        return len(parts)

    def _drop_text_if_unused(self, sha: str) -> None:
        if self.conn.execute("select 1 from documents where sha256 = ? limit 1", (sha,)).fetchone():
            return
        self.conn.execute("delete from vectors where chunk_id in (select id from chunks where sha256 = ?)",
                          (sha,))
        self.conn.execute("delete from chunks where sha256 = ?", (sha,))
        self.conn.execute("delete from texts where sha256 = ?", (sha,))
        self.vectors.forget()

    def drop(self, collection: str, path: str) -> None:
        """A file gone from a collection's folder leaves the index (its text too, unless still used)."""
        with self.conn:
            self.conn.execute("begin immediate")
            row = self.conn.execute(
                "delete from documents where collection = ? and path = ? returning sha256",
                (collection, path)).fetchone()
            if row:
                self._drop_text_if_unused(row[0])

    def touch(self, collection: str, path: str, mtime: float, size: int) -> None:
        self.conn.execute("update documents set mtime = ?, size = ? where collection = ? and path = ?",
                          (mtime, size, collection, path))

    def documents(self, collection: str) -> dict[str, tuple[float | None, int | None, str]]:
        """path -> (mtime, size, sha256) of each file the collection holds."""
        return {p: (m, s, h) for p, m, s, h in self.conn.execute(
            "select path, mtime, size, sha256 from documents where collection = ?", (collection,))}

    def note_collection(self, name: str, root: str) -> None:
        row = self.conn.execute("select root from collections where name = ?", (name,)).fetchone()
        if row and row[0] != root:
            raise DocsIndexError(f"collection {name!r} already indexes {row[0]}; remove it first or pick "
                                 "another name")
        self.conn.execute("insert into collections(name, root, indexed_at) values (?, ?, ?) "
                          "on conflict(name) do update set indexed_at = excluded.indexed_at",
                          (name, root, time.time()))

    def remove_collection(self, name: str) -> None:
        with self.conn:
            self.conn.execute("begin immediate")
            if not self.conn.execute("select 1 from collections where name = ?", (name,)).fetchone():
                raise DocsIndexError(f"no collection named {name!r} (see `llamadesk docs list`)")
            shas = [r[0] for r in self.conn.execute(
                "delete from documents where collection = ? returning sha256", (name,)).fetchall()]
            for sha in set(shas):
                self._drop_text_if_unused(sha)
            self.conn.execute("delete from collections where name = ?", (name,))

    # Reading

    def text(self, sha256: str) -> str | None:
        row = self.conn.execute("select text from texts where sha256 = ?", (sha256,)).fetchone()
        return row[0] if row else None

    def page_starts(self, sha256: str) -> tuple[int, ...]:
        row = self.conn.execute("select page_starts from texts where sha256 = ?", (sha256,)).fetchone()
        return tuple(json.loads(row[0])) if row and row[0] else ()

    def collections(self) -> list[CollectionInfo]:
        out = []
        rows = self.conn.execute("select name, root, indexed_at from collections order by name").fetchall()
        for name, root, at in rows:
            docs = self.conn.execute("select path, pages, sha256 from documents where collection = ?",
                                     (name,)).fetchall()
            n_chunks = self.conn.execute(
                f"select count(*) from chunks where sha256 in ({_IN_COLLECTION})", (name,)).fetchone()[0]
            out.append(CollectionInfo(name=name, root=root, files=len(docs),
                                      pages=sum(max(p or 0, 1) for _, p, _ in docs), chunks=n_chunks,
                                      indexed_at=at or 0.0,
                                      missing=sum(1 for p, _, _ in docs if not os.path.exists(p))))
        return out

    def search(self, query: str, *, shas: Iterable[str] | None = None, collection: str | None = None,
               k: int = 5, mode: str = "auto") -> list[Hit]:
        """The passages that best answer `query`. mode: "auto" (hybrid when vectors exist for the
        set model, else BM25), "bm25", "vector" or "hybrid"."""
        if mode not in ("auto", "bm25", "vector", "hybrid"):
            raise ValueError(f"search mode {mode!r}: expected auto, bm25, vector or hybrid")
        allowed, params = self._allowed(shas, collection)
        use_vec = (mode != "bm25" and self._embed is not None and self.model_id is not None
                   and self.vectors.count(self.model_id) > 0)
        if mode in ("vector", "hybrid") and not use_vec:
            raise DocsIndexError("vector search needs an embedding model and passages embedded with it")
        pool = k if not use_vec or mode == "vector" else max(50, k)
        ranked: list[list[int]] = []
        bm: list[tuple[int, float]] = []
        if mode != "vector":
            bm = self._bm25(query, allowed, params, pool)
            ranked.append([i for i, _ in bm])
        if use_vec:
            assert self._embed is not None and self.model_id is not None
            q = self._embed([query])[0]
            vec = self.vectors.nearest(self.model_id, q, pool, allowed, params)
            if mode == "vector":
                return self._hits(vec[:k], collection)
            ranked.append([i for i, _ in vec])
        if len(ranked) == 1:
            return self._hits(bm[:k], collection)
        fused: dict[int, float] = {}
        for ranks in ranked:
            for r, cid in enumerate(ranks):
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + r + 1)
        best = sorted(fused.items(), key=lambda kv: -kv[1])[:k]
        return self._hits(best, collection)

    def _allowed(self, shas: Iterable[str] | None, collection: str | None) -> tuple[str, tuple]:
        if shas is not None:
            shas = tuple(shas)
            return f"select id from chunks where sha256 in ({','.join('?' * len(shas))})", shas
        if collection is not None:
            return f"select id from chunks where sha256 in ({_IN_COLLECTION})", (collection,)
        return "", ()

    def fts_query(self, query: str) -> str:
        words = re.findall(r"\w+", query.lower())
        kept = [w for w in words if w not in _STOP] or words
        if self.tokenizer == "trigram":
            kept = [w for w in kept if len(w) >= 3]
        return " OR ".join(f'"{w}"' for w in dict.fromkeys(kept))

    def _bm25(self, query: str, allowed: str, params: tuple, k: int) -> list[tuple[int, float]]:
        q = self.fts_query(query)
        if not q:
            return []
        cond = f" and rowid in ({allowed})" if allowed else ""
        rows = self.conn.execute(
            f"select rowid, bm25(chunks_fts) s from chunks_fts where chunks_fts match ?{cond} "
            "order by s limit ?",
            (q, *params, k)).fetchall()
        return [(int(i), -float(s)) for i, s in rows]

    def _hits(self, scored: list[tuple[int, float]], collection: str | None) -> list[Hit]:
        if not scored:
            return []
        marks = ",".join("?" * len(scored))
        rows = {r[0]: r[1:] for r in self.conn.execute(
            f"select id, sha256, where_, start, end_, text from chunks where id in ({marks})",
            [cid for cid, _ in scored])}
        docs: dict[str, tuple] = {}
        out = []
        for cid, score in scored:
            c = rows.get(cid)
            if c is None:
                continue
            if c[0] not in docs:
                docs[c[0]] = self.conn.execute(
                    "select name, path, collection from documents where sha256 = ? "
                    "order by (collection = ?) desc, id limit 1", (c[0], collection or "")).fetchone()
            d = docs[c[0]] or ("", "", "")
            out.append(Hit(document=d[0], sha256=c[0], where=c[1], start=c[2], end=c[3], text=c[4],
                           score=score, collection=d[2] or None, path=d[1]))
        return out

    def size_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (str(self.path), f"{self.path}-wal") if os.path.exists(p))
