"""`llamadesk bench --docs`: the documents index on a corpus no one here wrote.

Debian's python3-doc (the Python documentation as HTML, with each page's reStructuredText source
beside it under _sources/) is indexed as a user would index a folder: index time, pages a
second, the file's size, BM25 latency at that size, and recall@5 / MRR on a question set whose
answers sit on known pages (app.bench.docs_set). The bench installs nothing: the folder is
given, or the Debian one is used.

Vectors are the bundled model's own embeddings. Embedding a whole corpus with it on a CPU takes
far longer than a benchmark should (the figure is extrapolated and printed), so BM25, vectors
and hybrid are compared on a pool: each question's BM25 top-N passages from the whole corpus,
all in one small index that every question searches. The three rankings see the same passages,
so they compare fairly, and what is measured is whether the embeddings order BM25's candidates
better or worse (a passage BM25 never ranked cannot be in the pool).
Retrieved context is what a conversation pays for: the top-5 passages' tokens and the model's
prefill time for them.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from app.bench.docs_set import QUESTIONS, same_page
from app.docs.collections import index_folder
from app.docs.extract import Extracted
from app.docs.index import DocsIndex
from app.errors import LlamaDeskError

DEFAULT_DIR = Path("/usr/share/doc/python3/html")
K = 5
MRR_DEPTH = 10
EMBED_TOKENS = 256  # a passage's head; its ~1,200 characters are ~300 tokens


class DocsBenchError(LlamaDeskError):
    pass


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _page(hit_path: str, root: Path) -> str:
    try:
        rel = Path(hit_path).resolve().relative_to(root).as_posix()
    except ValueError:
        return hit_path
    return same_page(rel)


def _quality(ix: DocsIndex, root: Path, mode: str, collection: str | None = None,
             shas: list[str] | None = None) -> dict:
    hits5, rr, latencies = [], [], []
    for question, pages in QUESTIONS:
        t0 = time.perf_counter()
        hits = ix.search(question, k=MRR_DEPTH, mode=mode, collection=collection, shas=shas)
        latencies.append((time.perf_counter() - t0) * 1000)
        ranks = [i for i, h in enumerate(hits) if _page(h.path, root) in pages]
        first = ranks[0] + 1 if ranks else None
        hits5.append(1.0 if first and first <= K else 0.0)
        rr.append(1.0 / first if first else 0.0)
    return {f"{mode}_recall@5": round(statistics.fmean(hits5), 3),
            f"{mode}_mrr": round(statistics.fmean(rr), 3),
            f"{mode}_rr_median": round(statistics.median(rr), 3),
            f"{mode}_query_ms_median": round(statistics.median(latencies), 2)}


def run_docs_bench(docs_dir: str | None, model: str | None, opts, pool: int = 10, vectors: bool = True,
                   rounds: int = 5, tokenizer: str = "porter unicode61", prefill_questions: int = 3) -> dict:
    root = Path(docs_dir or DEFAULT_DIR).expanduser()
    if not root.is_dir():
        raise DocsBenchError(f"{root}: no such folder; install Debian's python3-doc (apt-get install "
                             "python3-doc) or give --docs-dir")
    root = root.resolve()
    out: dict = {"docs_dir": str(root), "questions": len(QUESTIONS), "tokenizer": tokenizer}
    with tempfile.TemporaryDirectory(prefix="llamadesk-bench-docs-") as tmp:
        ix = DocsIndex.open(Path(tmp) / "docs.db", tokenizer=tokenizer)
        try:
            t0 = time.perf_counter()
            rep = index_folder(ix, root, "bench")
            took = time.perf_counter() - t0
            n_chunks = ix.conn.execute("select count(*) from chunks").fetchone()[0]
            ix.conn.execute("pragma wal_checkpoint(truncate)")
            out.update(files=rep.added, failed=len(rep.failed), pages=rep.pages, passages=n_chunks,
                       index_s=round(took, 1), pages_per_s=round(rep.pages / took, 1),
                       index_mb=round(ix.size_bytes() / 1e6, 1))
            lat = []
            for _ in range(rounds):
                for question, _pages in QUESTIONS:
                    t = time.perf_counter()
                    ix.search(question, k=K, mode="bm25")
                    lat.append((time.perf_counter() - t) * 1000)
            out.update(bm25_query_ms_p50=round(_pct(lat, 50), 2), bm25_query_ms_p99=round(_pct(lat, 99), 2),
                       bm25_query_ms_mean=round(statistics.fmean(lat), 2))
            out.update(_quality(ix, root, "bm25"))
            if vectors:
                out.update(_vectors(ix, root, model, opts, pool, prefill_questions))
        finally:
            ix.close()
    return out


def _vectors(ix: DocsIndex, root: Path, model_path: str | None, opts, pool: int,
             prefill_questions: int) -> dict:
    from app.engine.embedder import Embedder
    from app.engine.loader import load_model
    from app.engine.models import resolve_model

    path = resolve_model(model_path)
    m = load_model(path, opts)
    emb = Embedder(m, 512)
    out: dict = {"model": path.name, "pool": pool}
    try:
        embedded = [0, 0.0, 0]  # passages, seconds, tokens

        def embed(texts: list[str]) -> np.ndarray:
            t = time.perf_counter()
            rows = []
            for text in texts:
                toks = emb.tokenize(text)[:EMBED_TOKENS]
                embedded[2] += len(toks)
                rows.append(emb.embed(toks))
            embedded[0] += len(texts)
            embedded[1] += time.perf_counter() - t
            return np.vstack(rows)

        sub = _pool_index(ix, pool)
        try:
            sub.set_embedder(embed, path.name)
            sub.embed_missing(batch=32)
            total = ix.conn.execute("select count(*) from chunks").fetchone()[0]
            per = embedded[1] / max(embedded[0], 1)
            out.update(pool_passages=embedded[0], embed_s=round(embedded[1], 1),
                       embed_tokens_per_s=round(embedded[2] / max(embedded[1], 1e-9), 1),
                       whole_corpus_embed_min=round(per * total / 60, 1))
            for mode in ("bm25", "vector", "hybrid"):
                got = _quality(sub, root, mode)
                out.update({f"pool_{k}": v for k, v in got.items()})
        finally:
            sub.close()
        out.update(_prefill(ix, m, prefill_questions))
    finally:
        emb.close()
        m.close()
    return out


def _pool_index(ix: DocsIndex, pool: int) -> DocsIndex:
    """Each question's BM25 top-`pool` passages from the whole corpus, all in one index (in memory),
    each passage a document of its own that keeps its page's path. Every question searches all of
    them, so the other questions' passages are its distractors."""
    sub = DocsIndex.open(Path(":memory:"), tokenizer=ix.tokenizer)
    seen = set()
    for question, _pages in QUESTIONS:
        for h in ix.search(question, k=pool, mode="bm25"):
            if (h.sha256, h.start) in seen:
                continue
            seen.add((h.sha256, h.start))
            sub.add(Extracted(name=h.document, path=h.path, kind="text", text=h.text,
                              sha256=hashlib.sha256(f"{h.sha256}:{h.start}".encode()).hexdigest()))
    return sub


def _prefill(ix: DocsIndex, m, n: int) -> dict:
    """Tokens of each question's top-5 passages, and the model's prefill time for a few of them."""
    counts, times = [], []
    for i, (question, _pages) in enumerate(QUESTIONS):
        hits = ix.search(question, k=K, mode="bm25")
        context = "\n\n".join(f"[{j + 1}] {h.document} ({h.where})\n{h.text}" for j, h in enumerate(hits))
        toks = m.llm.tokenize(context.encode("utf-8"), add_bos=True, special=False)
        counts.append(len(toks))
        if i < n:
            toks = toks[: m.llm.n_ctx() - 1]
            m.llm.reset()
            t = time.perf_counter()
            m.llm.eval(toks)
            times.append(time.perf_counter() - t)
    return {"top5_tokens_median": int(statistics.median(counts)),
            "top5_tokens_mean": round(statistics.fmean(counts)), "top5_tokens_max": max(counts),
            "prefill_s_median": round(statistics.median(times), 2) if times else None,
            "prefill_tokens_per_s": round(sum(counts[:n]) / sum(times), 1) if times else None}
