"""`bench --docs` on a small folder laid out like python3-doc: the figures come out, and recall
counts only questions whose answer page is there (half of them here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.bench.docs_set import QUESTIONS, same_page


def _corpus(root):
    for i, (question, pages) in enumerate(QUESTIONS):
        if i % 2 == 0:
            page = root / pages[0]
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"<html><body><h1>Page {i}</h1><p>{question} The answer is here.</p>"
                            "</body></html>")
    (root / "_sources").mkdir()
    (root / "_sources" / "intro.rst.txt").write_text("Nothing that answers anything.\n")


def test_bench_docs_bm25_on_a_small_folder(tmp_path):
    _corpus(tmp_path / "html")
    cmd = [sys.executable, "-m", "app", "bench", "--docs", "--docs-dir", str(tmp_path / "html"),
           "--no-vectors",
           "--rounds", "2", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    half = (len(QUESTIONS) + 1) // 2
    assert got["files"] == half + 1 and got["failed"] == 0 and got["passages"] >= half
    assert 0.4 <= got["bm25_recall@5"] <= half / len(QUESTIONS)
    assert got["bm25_mrr"] <= got["bm25_recall@5"] and got["bm25_query_ms_p50"] <= got["bm25_query_ms_p99"]
    assert got["index_mb"] > 0 and got["pages_per_s"] > 0


def test_bench_docs_without_the_folder_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "app", "bench", "--docs", "--docs-dir", str(tmp_path / "none"),
                        "--no-vectors"], capture_output=True, text=True, timeout=60, env={**os.environ})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "python3-doc" in r.stderr


def test_a_page_and_its_source_are_one_page():
    assert same_page("_sources/library/functools.rst.txt") == "library/functools.html"
    assert same_page("library/functools.html") == "library/functools.html"
