"""Where pulled models live, which are there, which are half there, and deleting them.

The layout is huggingface_hub's own cache layout (models--ORG--NAME/snapshots/COMMIT/FILE,
refs/REVISION), rooted in LlamaDesk's models folder, so huggingface_hub's scan_cache_dir
lists it with sizes and its delete_files frees it, and `HF_HUB_CACHE=<that folder> hf cache
ls` shows the same. Files are kept in the snapshot itself, not as symlinks to blobs/<sha256>:
model discovery (app.engine.models) names a model by its resolved path, and a blob named by
its hash would show up as one. blobs/ holds only what is not yet a model: the partial file
(<sha256>.incomplete, which scan_cache_dir reports as incomplete), its journal and its lock.
Nothing in blobs/ ends in .gguf, so discovery never lists it.

Every path this module hands out for writing (a repository's folder, a blob, a snapshot file,
a ref) goes through `contained`, so a name that slipped past app.hub.names still cannot put a
file, or a folder, anywhere but under the models folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from app import paths
from app.hub import journal
from app.hub.errors import UnsafeAnswer
from app.hub.names import shown

PARTIAL, JOURNAL, LOCK = ".incomplete", ".incomplete.journal", ".lock"


def root(create: bool = False) -> Path:
    return paths.user_models_dir(create=create) / "huggingface"


def contained(path: Path, within: Path | None = None) -> Path:
    """`path`, once it is certain to lie under `within` (by default the models folder), every
    link on the way followed: the last check before anything is created, replaced or removed."""
    folder = within or root()
    try:
        base, real = folder.resolve(), path.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL in it, a loop of links
        raise UnsafeAnswer(f"{shown(str(path))} cannot be a path here; refused, nothing was "
                           "written") from None
    if real == base or not real.is_relative_to(base) or not base.is_relative_to(root().resolve()):
        raise UnsafeAnswer(f"{shown(str(path))} leads to {shown(str(real))}, outside the models folder's "
                           f"{folder}; refused, nothing was written")
    return path


def repo_dir(repo: str) -> Path:
    from huggingface_hub.file_download import repo_folder_name

    return contained(root() / repo_folder_name(repo_id=repo, repo_type="model"))


def blob_paths(repo: str, sha256: str) -> tuple[Path, Path, Path]:
    """(partial, journal, lock) for the file with this sha256 in `repo`."""
    blobs = repo_dir(repo) / "blobs"
    partial, journal_path, lock = (blobs / (sha256 + end) for end in (PARTIAL, JOURNAL, LOCK))
    return contained(partial, blobs), contained(journal_path, blobs), contained(lock, blobs)


def snapshot_path(repo: str, commit: str, name: str) -> Path:
    snapshot = repo_dir(repo) / "snapshots" / commit
    return contained(snapshot / name, contained(snapshot, repo_dir(repo) / "snapshots"))


def write_ref(repo: str, revision: str, commit: str) -> None:
    """refs/<branch> -> commit, as huggingface_hub writes it (a commit needs no ref)."""
    if revision == commit:
        return
    refs = repo_dir(repo) / "refs"
    ref = contained(refs / revision, refs)
    ref.parent.mkdir(parents=True, exist_ok=True)
    from app import atomic_file

    atomic_file.write_text(ref, commit)


@dataclass(frozen=True)
class Downloaded:
    repo: str
    name: str
    commit: str
    size: int
    path: Path
    info: object  # huggingface_hub's CachedFileInfo, for delete_files

    def to_json(self) -> dict:
        return {"repo": self.repo, "file": self.name, "commit": self.commit, "size": self.size,
                "path": str(self.path)}


@dataclass(frozen=True)
class Partial:
    repo: str
    name: str
    size: int
    done: int  # bytes recorded in the journal
    on_disk: int  # blocks the partial occupies (it is allocated whole at the start)
    path: Path
    sha256: str

    def to_json(self) -> dict:
        return {"repo": self.repo, "file": self.name, "size": self.size, "done": self.done,
                "on_disk": self.on_disk, "path": str(self.path), "sha256": self.sha256}


def _scan():
    from huggingface_hub import scan_cache_dir

    r = root()
    return scan_cache_dir(r) if r.is_dir() else None


def downloaded() -> list[Downloaded]:
    scan = _scan()
    out: list[Downloaded] = []
    for repo in scan.repos if scan else ():
        for rev in repo.revisions:
            for f in rev.files:
                name = f.file_path.relative_to(rev.snapshot_path).as_posix()
                out.append(Downloaded(repo.repo_id, name, rev.commit_hash, f.size_on_disk, f.file_path, f))
    return sorted(out, key=lambda d: (d.repo, d.name, d.commit))


def partials() -> list[Partial]:
    """Every partial download, from its journal; a partial whose journal is gone is listed too,
    under its file name, so that nothing taking space stays unseen."""
    out = []
    for data in sorted(root().glob(f"*/blobs/*{PARTIAL}")):
        sha = data.name[: -len(PARTIAL)]
        got = journal.progress_of(data.with_name(sha + JOURNAL))
        meta, done = got if got else ({}, 0)
        repo = meta.get("repo") or data.parent.parent.name
        out.append(Partial(repo, meta.get("name") or data.name, int(meta.get("size") or 0), done,
                           _allocated(data), data, sha))
    return out


def _allocated(p: Path) -> int:
    try:
        st = p.stat()
    except OSError:
        return 0
    return st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size


def remove_partial(p: Partial) -> int:
    """Delete a partial, its journal and its lock; the bytes freed."""
    freed = _allocated(p.path)
    for f in blob_paths_of(p.path):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    prune(p.path.parent.parent)
    return freed


def blob_paths_of(partial: Path) -> tuple[Path, Path, Path]:
    sha = partial.name[: -len(PARTIAL)]
    return partial, partial.with_name(sha + JOURNAL), partial.with_name(sha + LOCK)


def delete(files: list[Downloaded]) -> int:
    """Delete downloaded files through huggingface_hub's own strategy; the bytes freed."""
    scan = _scan()
    if scan is None or not files:
        return 0
    # The scan's own entries for these paths: huggingface_hub matches entries by every field,
    # access time included, so an entry listed before the file was read (a load, a header
    # check) would count as another file still using the bytes, and nothing would read freed.
    wanted = {str(d.path) for d in files}
    fresh = [f for repo in scan.repos for rev in repo.revisions for f in rev.files
             if str(f.file_path) in wanted]
    strategy = scan.delete_files(*fresh)
    freed = strategy.expected_freed_size
    strategy.execute()
    for d in files:
        prune(repo_dir(d.repo))
    return freed


def prune(repo_folder: Path) -> None:
    """Remove a repository's folder once it holds no file and no partial: an empty one would
    list as a repository with nothing in it."""
    if not repo_folder.is_dir():
        return
    for snap in (repo_folder / "snapshots").glob("*"):
        with contextlib.suppress(OSError):
            _remove_empty_dirs(snap)
    has_files = any(p.is_file() for p in (repo_folder / "snapshots").rglob("*"))
    has_partials = any((repo_folder / "blobs").glob(f"*{PARTIAL}"))
    if not has_files and not has_partials:
        shutil.rmtree(repo_folder, ignore_errors=True)


def _remove_empty_dirs(d: Path) -> None:
    for sub in sorted(d.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if sub.is_dir():
            with contextlib.suppress(OSError):
                os.rmdir(sub)
    os.rmdir(d)
