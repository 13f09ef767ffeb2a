"""The index on real SQLite: BM25 finds the page with the answer, attachments stay apart, and
vectors give the same answers through sqlite-vec and through numpy."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from app.docs.extract import extract
from app.docs.index import DocsIndex, DocsIndexError
from app.errors import FileProblem
from tests.docs import files

DIM = 256


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A real (if simple) embedding: hashed word counts, so similar wording lands close."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"\w+", t.lower()):
            out[i, zlib.crc32(w.encode()) % DIM] += 1.0
    return out


def _docs(tmp_path):
    md = tmp_path / "INSTALL.md"
    md.write_text(files.MARKDOWN, encoding="utf-8")
    html = tmp_path / "tea.html"
    html.write_text(files.HTML, encoding="utf-8")
    return [extract(files.pdf(tmp_path / "story.pdf")), extract(md), extract(html),
            extract(files.docx(tmp_path / "guide.docx"))]


def test_bm25_finds_the_page_with_the_answer(tmp_path):
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        for ex in _docs(tmp_path):
            assert ix.add(ex) > 0
        hits = ix.search("When does the ferry to Vlieland leave?", k=3)
        top = hits[0]
        assert top.document == "story.pdf" and top.where == "page 2" and "seven fifteen" in top.text
        assert ix.text(top.sha256)[top.start:top.end] == top.text
        assert ix.search("green tea temperature")[0].where == "Brewing tea > Green tea"
        assert ix.search("oystercatcher")[0].where == "Field Guide > Waders"
        assert ix.search("") == [] and ix.search("?!") == []
        assert ix.search('"quoted" OR NEAR( AND') is not None  # FTS5 syntax in a question is only words


def test_attachments_are_searched_alone_and_added_once(tmp_path):
    docs = _docs(tmp_path)
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        counts = [ix.add(ex) for ex in docs]
        assert [ix.add(ex) for ex in docs] == counts  # idempotent by hash
        assert ix.conn.execute("select count(*) from chunks").fetchone()[0] == sum(counts)
        md_sha = docs[1].sha256
        hits = ix.search("ferry water install", shas=[md_sha], k=10)
        assert hits and {h.sha256 for h in hits} == {md_sha}
        assert ix.search("ferry", shas=[]) == []


def test_reopened_index_keeps_everything(tmp_path):
    ex = extract(files.pdf(tmp_path / "story.pdf"))
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        ix.add(ex)
    with DocsIndex.open(tmp_path / "docs.db") as ix:
        assert ix.search("lighthouse")[0].where == "page 1"
        assert ix.page_starts(ex.sha256) == ex.page_starts


def test_trigram_tokenizer_matches_inside_words(tmp_path):
    with DocsIndex.open(tmp_path / "t.db", tokenizer="trigram") as ix:
        ix.add(extract(files.pdf(tmp_path / "story.pdf")))
        assert ix.search("lighthous")[0].where == "page 1"
    with DocsIndex.open(tmp_path / "t.db") as ix:  # the file keeps the tokenizer it was made with
        assert ix.tokenizer == "trigram"


def test_a_file_that_is_no_database_is_one_line(tmp_path):
    bad = tmp_path / "docs.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(FileProblem) as e:
        DocsIndex.open(bad)
    assert "\n" not in str(e.value) and str(bad) in str(e.value)


def _sqlite_that_loads_extensions():
    dbapi2 = pytest.importorskip("pysqlite3.dbapi2",
                                 reason="pysqlite3-binary is a Linux x86-64 test dependency")
    return dbapi2


def test_vectors_through_sqlite_vec_and_numpy_agree(tmp_path):
    dbapi2 = _sqlite_that_loads_extensions()
    docs = _docs(tmp_path)
    rankings = {}
    for name, kw in (("sqlite-vec", {"sqlite": dbapi2}), ("numpy", {"use_extension": False})):
        with DocsIndex.open(tmp_path / f"{name}.db", **kw) as ix:
            assert ix.vectors.backend == name
            ix.set_embedder(bag_of_words, "bow")
            for ex in docs:
                ix.add(ex)
            assert ix.vectors.count("bow") == ix.conn.execute("select count(*) from chunks").fetchone()[0]
            vec = ix.search("boiling water four minutes black tea", mode="vector", k=3)
            assert vec[0].where == "Brewing tea > Black tea" and -1.0 <= vec[0].score <= 1.0
            only_pdf = ix.search("black tea", mode="vector", shas=[docs[0].sha256], k=3)
            assert {h.document for h in only_pdf} == {"story.pdf"}
            hybrid = ix.search("ferry Vlieland", k=3)  # auto: BM25 and vectors fused
            assert hybrid[0].where == "page 2" and hybrid[0].score <= 2 / 61
            rankings[name] = [(h.sha256, h.start) for h in vec]
    assert rankings["sqlite-vec"] == rankings["numpy"]
    # A file written where sqlite-vec loads is read where it does not.
    with DocsIndex.open(tmp_path / "sqlite-vec.db", use_extension=False) as ix:
        ix.set_embedder(bag_of_words, "bow")
        assert [(h.sha256, h.start) for h in ix.search("boiling water four minutes black tea", mode="vector",
                                                       k=3)] == rankings["numpy"]


def test_vectors_are_filled_for_passages_indexed_before_the_model(tmp_path):
    with DocsIndex.open(tmp_path / "docs.db", use_extension=False) as ix:
        for ex in _docs(tmp_path):
            ix.add(ex)
        with pytest.raises(DocsIndexError):
            ix.search("tea", mode="vector")
        ix.set_embedder(bag_of_words, "bow")
        seen = []
        made = ix.embed_missing(progress=lambda done, total: seen.append((done, total)), batch=2)
        assert made == ix.vectors.count("bow") > 0 and seen[-1] == (made, made)
        assert ix.embed_missing() == 0


def test_the_bundled_model_embeds_and_finds_a_passage(tmp_path, model_path):
    from app.engine.embedder import Embedder
    from app.engine.loader import LoadOptions, load_model

    model = load_model(model_path, LoadOptions(n_ctx=256))
    emb = Embedder(model, 128)
    try:
        def embed(texts):
            return np.vstack([emb.embed(emb.tokenize(t)[:128]) for t in texts])

        with DocsIndex.open(tmp_path / "docs.db", use_extension=False) as ix:
            ix.set_embedder(embed, "gemma-3-270m")
            for ex in _docs(tmp_path)[1:]:  # the PDF's pages are left out: fewer passages to embed
                ix.add(ex)
            said = "The oystercatcher nests on open shingle and calls loudly at night."
            hit = ix.search(said, mode="vector")[0]
            assert hit.document == "guide.docx" and "oystercatcher" in hit.text and hit.score > 0.9
    finally:
        emb.close()
        model.close()
