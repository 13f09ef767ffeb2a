"""A folder indexed once and searched by any conversation (GPT4All's LocalDocs, in one file).

A re-index reads only what changed: a file whose mtime and size are as indexed is not opened,
and one that was touched but not edited keeps its passages (same hash). Every file is its own
transaction, so a cancel or a bad file loses nothing already done, and a file that fails keeps
what was indexed of it before. Files gone from the folder are named in the report and leave the
index, but only after a whole walk: a cancelled one cannot tell "gone" from "not reached yet".
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from app.docs.extract import DocumentError, extract, supported, why_not_opened
from app.docs.index import DocsIndex, DocsIndexError


@dataclass
class Progress:
    files_done: int
    files_total: int
    pages: int
    current: str


@dataclass
class Report:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    cancelled: bool = False
    pages: int = 0
    chunks: int = 0


def index_folder(index: DocsIndex, root: Path, name: str, progress: Callable[[Progress], None] | None = None,
                 cancel: threading.Event | None = None, max_files: int = 100_000) -> Report:
    root = Path(root).expanduser()
    if not name.strip():
        raise DocsIndexError("a collection needs a name")
    try:
        st = root.stat()
    except OSError as e:
        raise DocumentError(root, f"cannot be opened ({e.strerror or e})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise DocumentError(root, "not a folder")
    root = root.resolve()
    report = Report()
    files = _walk(root, report, cancel, max_files)
    if report.cancelled:
        return report
    index.note_collection(name, str(root))
    known = index.documents(name)
    total = len(files)
    if progress:
        progress(Progress(0, total, 0, ""))
    for done, f in enumerate(files):
        if cancel is not None and cancel.is_set():
            report.cancelled = True
            return report
        _one(index, name, f, known.get(str(f)), report)
        if progress:
            progress(Progress(done + 1, total, report.pages, str(f)))
    seen = {str(f) for f in files}
    for path in sorted(set(known) - seen):
        index.drop(name, path)
        report.deleted.append(path)
    return report


def _one(index: DocsIndex, name: str, f: Path, was, report: Report) -> None:
    try:
        st = os.stat(f)
    except OSError as e:
        report.failed.append((str(f), f"cannot be opened ({why_not_opened(e)})"))
        return
    if was is not None and was[0] == st.st_mtime and was[1] == st.st_size:
        report.unchanged += 1
        return
    try:
        ex = extract(f)
    except DocumentError as e:
        report.failed.append((str(f), e.reason))
        return
    if was is not None and was[2] == ex.sha256:
        index.touch(name, str(f), st.st_mtime, st.st_size)
        report.unchanged += 1
        return
    report.chunks += index.add(ex, name, mtime=st.st_mtime, size=st.st_size)
    report.pages += max(ex.pages, 1)
    if was is None:
        report.added += 1
    else:
        report.updated += 1


def _walk(root: Path, report: Report, cancel: threading.Event | None, max_files: int) -> list[Path]:
    """Supported files under `root`, hidden ones left out, each folder entered once however many
    links lead to it (so a symlink loop ends), at most `max_files` or none."""
    found: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        d = stack.pop()
        if cancel is not None and cancel.is_set():
            report.cancelled = True
            return found
        try:
            st = os.stat(d)
            if (st.st_dev, st.st_ino) in seen_dirs:
                report.failed.append((str(d), "a symlink loop (this folder is already being indexed); "
                                              "not followed"))
                continue
            seen_dirs.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as err:
            report.failed.append((str(d), f"cannot be opened ({why_not_opened(err)})"))
            continue
        subdirs = []
        for ent in entries:
            if ent.name.startswith("."):
                continue
            try:
                is_dir = ent.is_dir()  # follows links; a looping link raises ELOOP
            except OSError:
                is_dir = False
            if is_dir:
                subdirs.append(Path(ent.path))
            elif supported(ent.name):
                found.append(Path(ent.path))
                if len(found) > max_files:
                    raise DocsIndexError(f"{root}: more than {max_files:,} documents; index a smaller folder "
                                         "(nothing was indexed)")
        stack.extend(reversed(subdirs))
    return sorted(found)
