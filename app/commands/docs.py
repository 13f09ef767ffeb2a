"""`llamadesk docs`: folders indexed as collections (LocalDocs) and searched from the shell.

The index is the one the window and `ask --docs` read (app.paths.data_dir()/docs.db), so a
collection added here is there for every conversation. Indexing runs on a worker thread so that
Ctrl+C only asks it to stop between files: what was indexed stays, and `add` again goes on.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from app.commands.common import check_range, note


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("docs", help="index folders of documents and search them",
                       description="Collections: folders of PDF, DOCX, HTML, Markdown, text and code "
                                   "indexed once (BM25, SQLite) and searched by any conversation "
                                   "(`ask --docs NAME`).")
    p.add_argument("--db", metavar="FILE",
                   help="the index file (default: docs.db in LlamaDesk's data folder)")
    ds = p.add_subparsers(dest="docs_command", metavar="ACTION", required=True)
    a = ds.add_parser("add", help="index a folder as a collection, or bring one up to date",
                      description="Index DIR as collection NAME. Again on the same folder, only files "
                                  "changed since are read, and files deleted since leave the index.")
    a.add_argument("dir", metavar="DIR")
    a.add_argument("--name", help="the collection's name (default: the folder's name)")
    a.add_argument("--max-files", type=int, default=100_000, metavar="N",
                   help="refuse a folder with more documents than this (default 100000)")
    ls = ds.add_parser("list", help="the collections: files, pages, passages, when indexed")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    s = ds.add_parser("search", help="the passages of a collection that best answer a query (BM25)")
    s.add_argument("name", metavar="NAME")
    s.add_argument("query", metavar="QUERY")
    s.add_argument("--k", type=int, default=5, metavar="N", help="passages to show (default 5)")
    s.add_argument("--json", action="store_true", help="print a JSON list of passages")
    r = ds.add_parser("remove", help="forget a collection (its files are not touched)")
    r.add_argument("name", metavar="NAME")
    return p


def run(args: argparse.Namespace) -> int:
    from app.docs.index import DocsIndex

    with DocsIndex.open(Path(args.db) if args.db else None) as ix:
        if args.docs_command == "add":
            return _add(ix, args)
        if args.docs_command == "list":
            return _list(ix, args.json)
        if args.docs_command == "search":
            return _search(ix, args)
        ix.remove_collection(args.name)
        note(f"removed collection {args.name!r}")
        return 0


def _add(ix, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from app.docs.collections import Progress, Report, index_folder

    check_range("--max-files", args.max_files, 1, 10_000_000)
    root = Path(args.dir).expanduser()
    name = args.name or root.resolve().name
    cancel = threading.Event()
    out: dict = {}
    bar = tqdm(total=0, unit="file", file=sys.stderr, disable=None, dynamic_ncols=True)

    def progress(p: Progress) -> None:
        bar.total = p.files_total
        bar.n = p.files_done
        bar.set_postfix_str(f"{p.pages} pages", refresh=False)
        bar.refresh()

    def work() -> None:
        try:
            out["report"] = index_folder(ix, root, name, progress, cancel, args.max_files)
        except BaseException as e:  # noqa: BLE001 - raised again on the main thread, which reports it
            out["error"] = e

    interrupted = []

    def on_sigint(signum, frame) -> None:  # a flag, not KeyboardInterrupt: an interrupted join
        interrupted.append(signum)        # can report a live thread as finished
        cancel.set()

    t0 = time.monotonic()
    worker = threading.Thread(target=work, name="docs-index")
    main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    before = signal.signal(signal.SIGINT, on_sigint) if main else None
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    finally:
        if main:
            signal.signal(signal.SIGINT, before)
    bar.close()
    if "error" in out:
        raise out["error"]
    rep: Report = out["report"]
    for path, why in rep.failed:
        note(f"{path}: {why}")
    for path in rep.deleted:
        note(f"{path}: deleted since the last index; dropped")
    took = time.monotonic() - t0
    line = (f"{name}: {rep.added} added, {rep.updated} updated, {rep.unchanged} unchanged, "
            f"{len(rep.deleted)} deleted, {len(rep.failed)} failed; {rep.pages} pages in {took:.1f} s")
    if rep.cancelled:
        note(f"cancelled; {line}. Run `llamadesk docs add` again to finish.")
        return 130 if interrupted else 1
    print(line)
    return 0


def _list(ix, as_json: bool) -> int:
    infos = ix.collections()
    if as_json:
        json.dump([asdict(c) for c in infos], sys.stdout)
        sys.stdout.write("\n")
        return 0
    if not infos:
        note("no collections yet: `llamadesk docs add DIR --name NAME` makes one")
        return 0
    for c in infos:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.indexed_at))
        gone = f", {c.missing} deleted since (run add again)" if c.missing else ""
        print(f"{c.name}\t{c.files} files, {c.pages} pages, {c.chunks} passages, indexed {when}{gone}"
              f"\t{c.root}")
    return 0


def _search(ix, args: argparse.Namespace) -> int:
    from app.docs.index import DocsIndexError

    check_range("--k", args.k, 1, 1000)
    if args.name not in {c.name for c in ix.collections()}:
        raise DocsIndexError(f"no collection named {args.name!r} (see `llamadesk docs list`)")
    hits = ix.search(args.query, collection=args.name, k=args.k)
    if args.json:
        json.dump([asdict(h) for h in hits], sys.stdout)
        sys.stdout.write("\n")
        return 0
    if not hits:
        note(f"nothing in {args.name!r} matches that")
        return 0
    for n, h in enumerate(hits, 1):
        snippet = " ".join(h.text.split())
        snippet = snippet if len(snippet) <= 240 else snippet[:239] + "…"
        where = f" ({h.where})" if h.where else ""
        print(f"[{n}] {h.path}{where}  score {h.score:.2f}\n    {snippet}")
    return 0
