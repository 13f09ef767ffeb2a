"""`models search TEXT`: repositories with GGUF files, each file with its quantization, size
and fit label.

One list_models call finds the repositories (the Hub's "gguf" filter: those with GGUF
files); one model_info per repository gives the files' sizes and sha256; and one header
per repository, read with ranged requests from its smallest GGUF, gives the fit of all its
files: the layers, heads, window and vocabulary are the same in every quantization of one
model, only the weights differ, and those are each file's size. Repositories are asked in
parallel, since each costs a round trip or three.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from app.hub import api, names
from app.hub.errors import HubError
from app.hub.fit import judge, predict
from app.hub.quant import is_model_file, split_part
from app.hub.remote_header import fetch_header
from app.hub.resources import free_ram, free_vram, gpu_layers_used


@dataclass
class FoundFile:
    name: str
    quant: str
    size: int
    fit: str  # fits / tight / won't fit / ?
    needs: int | None  # RAM bytes predicted, where the header could be read
    parts: int = 1  # a split GGUF's number of files

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class FoundRepo:
    repo: str
    downloads: int | None
    likes: int | None
    gated: bool
    files: list[FoundFile] = field(default_factory=list)
    note: str | None = None  # why there are no fit labels (a header that could not be read)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["files"] = [f.to_json() for f in self.files]
        return d


def search(text: str, limit: int = 10, n_ctx: int = 4096, gpu_layers: int = -1) -> list[FoundRepo]:
    if not text.strip():
        raise ValueError("the search text is empty")
    with api.hub_errors():
        _answering()
        found = list(api.hf_api().list_models(search=text, filter="gguf", sort="downloads", limit=limit,
                                               expand=["downloads", "likes", "gated"]))
    layers = gpu_layers_used(gpu_layers)
    ram, vram = free_ram(), free_vram()
    from app.hub.ranged import client

    with client() as http, ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda m: _repo(http, m, n_ctx, layers, ram, vram), found))


def _answering() -> None:
    """huggingface_hub's list_models retries a Hub it cannot reach five times with backoff before
    it gives up, right for a transfer and wrong for a search someone waits on: one plain request
    first, so a refused or unreachable endpoint is the search's one line at once. Any answer at
    all, an error status too, means the Hub is there, and list_models goes on as ever."""
    from app.hub.ranged import client

    with client() as http:
        http.get(f"{api.endpoint()}/api/models", params={"limit": 1})


def _repo(http: httpx.Client, m, n_ctx: int, gpu_layers: int, ram, vram) -> FoundRepo:
    """One result's row; whatever goes wrong with this repository is said in its row, the
    other rows are not its hostages."""
    out = FoundRepo(m.id if isinstance(m.id, str) else repr(m.id), m.downloads, m.likes, bool(m.gated))
    if not names.is_repo_id(m.id):  # it would be asked for by this name, and pulled by it
        out.note = f"the Hub lists {m.id!r} as a repository, which is no ORG/NAME; left out"
        return out
    try:
        files, _ = api.gguf_files(m.id)
    except HubError as e:
        out.note = str(e)
        return out
    refused = [f for f in files if f.refused]
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        out.note = f"{refused[0].refused}{more}: left out"
    models = [f for f in files if is_model_file(f.name) and not f.refused]
    shown = [f for f in models if (split_part(f.name) or (1, 1))[0] == 1]
    totals = {f.name: sum(g.size for g in models if _same_split(f.name, g.name)) for f in shown}
    header = None
    if shown and not out.gated:
        smallest = min(shown, key=lambda f: f.size)
        try:
            header = fetch_header(http, smallest)
        except HubError as e:
            out.note = "; ".join(filter(None, (out.note, f"no fit: {e}")))
    for f in sorted(shown, key=lambda f: f.size):
        size = totals[f.name]
        label, needs = "?", None
        if header is not None:
            p = judge(predict(header, n_ctx, gpu_layers=gpu_layers, size=size), ram, vram)
            label, needs = p.label, p.ram_needed
        part = split_part(f.name)
        out.files.append(FoundFile(f.name, f.quant, size, label, needs, part[1] if part else 1))
    return out


def _same_split(first: str, other: str) -> bool:
    if first == other:
        return True
    a, b = split_part(first), split_part(other)
    return bool(a and b) and first[: -len("00001-of-00003.gguf")] == other[: -len("00001-of-00003.gguf")]
