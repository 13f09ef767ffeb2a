"""`pull REPO[:QUANT or FILE]` as steps a front end can show: resolve the file, check it
against the Hub's HEAD, predict its fit from its header, then transfer it.

Split in two (plan, then fetch) so the command line prints the file and its fit before
the first byte moves, and the window can later ask before it does.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import httpx

from app.hub import api, library, names
from app.hub.download import Outcome, Paused, Progress, fetch
from app.hub.errors import HubError, HubRequestError, UnsafeAnswer
from app.hub.fit import Prediction, judge, predict
from app.hub.quant import choose, selects, split_part
from app.hub.remote_header import fetch_header
from app.hub.resources import free_ram, free_vram, gpu_layers_used


def parse_spec(spec: str) -> tuple[str, str | None]:
    """"org/name:Q8_0" -> ("org/name", "Q8_0"); "org/name" -> ("org/name", None)."""
    repo, _, sel = spec.strip().partition(":")
    if not names.is_repo_id(repo):
        raise ValueError(f"{spec!r} is not a repository: give ORG/NAME[:QUANT or FILE], "
                         "e.g. unsloth/gemma-3-1b-it-GGUF:Q4_K_M")
    return repo, sel.strip() or None


@dataclass
class Plan:
    file: api.RemoteFile
    revision: str
    fit: Prediction | None
    done: int  # bytes a partial already holds

    @property
    def installed(self):
        p = library.snapshot_path(self.file.repo, self.file.commit, self.file.name)
        return p if p.is_file() and p.stat().st_size == self.file.size else None


def plan(http: httpx.Client, spec: str, revision: str = "main", n_ctx: int = 4096,
         gpu_layers: int = -1) -> Plan:
    repo, sel = parse_spec(spec)
    names.check_revision(revision)
    files, _ = api.gguf_files(repo, revision)
    try:
        f = choose(files, sel)
    except ValueError as e:
        raise HubRequestError(f"{repo}: {e}") from None
    if f.refused:
        raise UnsafeAnswer(f"{repo}: {f.refused}; refused, nothing was written")
    part = split_part(f.name)
    if part:
        raise HubRequestError(f"{repo}: {f.quant} comes split in {part[1]} files ({f.name}, ...); "
                              "pulling split GGUFs is not supported yet")
    if not f.sha256:
        raise HubRequestError(f"{repo}/{f.name}: the Hub gives no sha256 for it (not an LFS file), "
                              "so it cannot be verified; not pulled")
    _check_head(f)
    p = Plan(f, revision, None, 0)
    if p.installed is None:
        p.fit = fit_of(http, f, n_ctx, gpu_layers)
        got = library.partials()
        p.done = next((x.done for x in got if x.sha256 == f.sha256 and x.repo == f.repo), 0)
    return p


def _check_head(f: api.RemoteFile) -> None:
    """The resolve URL's HEAD (huggingface_hub's get_hf_file_metadata): where auth fails
    (gated, private) and where the Hub's ETag must agree with the LFS sha256 and size."""
    from huggingface_hub import get_hf_file_metadata

    with api.hub_errors(f.repo, f.name, f.commit):
        meta = get_hf_file_metadata(f.url(), token=api.token() or False, endpoint=api.endpoint())
    if meta.size is not None and meta.size != f.size:
        raise HubError(f"{f.repo}/{f.name}: the Hub lists {f.size:,} bytes, its file has {meta.size:,}")
    etag = (meta.etag or "").strip('"')
    if re.fullmatch(r"[0-9a-f]{64}", etag) and etag != f.sha256:
        raise HubError(f"{f.repo}/{f.name}: the file's ETag {etag[:12]}… is not its LFS sha256 "
                       f"{(f.sha256 or '')[:12]}…")


def fit_of(http: httpx.Client, f: api.RemoteFile, n_ctx: int, gpu_layers: int = -1) -> Prediction:
    header = fetch_header(http, f)
    return judge(predict(header, n_ctx, gpu_layers=gpu_layers_used(gpu_layers)), free_ram(), free_vram())


__all__ = ["Paused", "Plan", "cancel", "parse_spec", "plan", "run"]


def run(http: httpx.Client, p: Plan, parts: int = 4, progress: Progress | None = None,
        halt: threading.Event | None = None) -> Outcome:
    """The transfer; `halt` (set from any thread) pauses it as Ctrl+C does, raising Paused."""
    return fetch(http, p.file, p.revision, parts, progress, halt)


def cancel(spec: str) -> list[library.Partial]:
    """Remove the partial downloads of `spec` (every file of the repository when no file is named);
    works offline: the partials' journals say what they are."""
    repo, sel = parse_spec(spec)
    found = [p for p in library.partials() if p.repo == repo and selects(p.name, sel)]
    for p in found:
        library.remove_partial(p)
    return found
