"""Nearest passages by embedding: sqlite-vec in SQL where SQLite can load it, numpy otherwise.

Both read the same table (one float32 blob a passage and model), so an index written where
sqlite-vec loads still answers on a Python whose sqlite3 cannot load extensions (some macOS and
pyenv builds), and the other way round. Both are exact brute force, which is what sqlite-vec
does too; at a personal library's size (up to ~1e5 passages) that is a matrix product.
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

SCHEMA = """
create table if not exists vectors(
    chunk_id integer not null references chunks(id) on delete cascade,
    model text not null,
    v blob not null,
    primary key (model, chunk_id)
) without rowid;
"""


def _load_sqlite_vec(conn) -> bool:
    if not hasattr(conn, "enable_load_extension"):
        return False
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        conn.execute("select vec_version()").fetchone()
        return True
    except Exception as e:  # noqa: BLE001 - a missing or refused extension leaves numpy to do the work
        log.info("sqlite-vec not loaded (%s); vectors are searched with numpy", e)
        return False


class Vectors:
    """The `vectors` table of an open index and a way to search it."""

    def __init__(self, conn, use_extension: bool = True):
        self.conn = conn
        self.backend = "sqlite-vec" if use_extension and _load_sqlite_vec(conn) else "numpy"
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def put(self, model: str, ids: list[int], mat: np.ndarray) -> None:
        mat = np.asarray(mat, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(ids):
            raise ValueError(f"{len(ids)} passages but embeddings of shape {mat.shape}")
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        mat = mat / np.where(norms > 0, norms, 1)
        self.conn.executemany("insert or replace into vectors(chunk_id, model, v) values (?, ?, ?)",
                              [(i, model, row.tobytes()) for i, row in zip(ids, mat)])
        self._cache.pop(model, None)

    def forget(self) -> None:
        """Drop what numpy holds in memory (after passages were deleted)."""
        self._cache.clear()

    def count(self, model: str) -> int:
        return self.conn.execute("select count(*) from vectors where model = ?", (model,)).fetchone()[0]

    def missing(self, model: str, limit: int = 1 << 30) -> list[tuple[int, str]]:
        return self.conn.execute(
            "select c.id, c.text from chunks c where not exists (select 1 from vectors v where "
            "v.model = ? and v.chunk_id = c.id) order by c.id limit ?", (model, limit)).fetchall()

    def nearest(self, model: str, query: np.ndarray, k: int, allowed_sql: str = "",
                params: tuple = ()) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity), best first; `allowed_sql` is a `select id from chunks ...`."""
        q = np.asarray(query, dtype=np.float32).ravel()
        n = float(np.linalg.norm(q))
        if n > 0:
            q = q / n
        if self.backend == "sqlite-vec":
            cond = f" and chunk_id in ({allowed_sql})" if allowed_sql else ""
            rows = self.conn.execute(
                f"select chunk_id, vec_distance_cosine(v, ?) d from vectors where model = ?{cond} "
                f"order by d limit ?", (q.tobytes(), model, *params, k)).fetchall()
            return [(int(i), 1.0 - float(d)) for i, d in rows]
        ids, mat = self._matrix(model)
        if not len(ids) or mat.shape[1] != q.shape[0]:
            return []
        sims = mat @ q
        if allowed_sql:
            ok = np.fromiter((r[0] for r in self.conn.execute(allowed_sql, params)), dtype=np.int64)
            sims = np.where(np.isin(ids, ok), sims, -np.inf)
        top = np.argsort(-sims)[:k]
        return [(int(ids[i]), float(sims[i])) for i in top if np.isfinite(sims[i])]

    def _matrix(self, model: str) -> tuple[np.ndarray, np.ndarray]:
        got = self._cache.get(model)
        if got is None:
            rows = self.conn.execute("select chunk_id, v from vectors where model = ? order by chunk_id",
                                     (model,)).fetchall()
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            mat = (np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows]) if rows
                   else np.zeros((0, 0), dtype=np.float32))
            got = self._cache[model] = (ids, mat)
        return got
