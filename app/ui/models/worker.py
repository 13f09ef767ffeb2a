"""The Models window's work off the GUI thread: searches, fit checks, listing and deleting on
one worker, a download on another.

Each calls app.hub exactly as the command line does (search.search, pull.plan and pull.run,
library.*), so a file the window calls verified is one `llamadesk pull` would too. Every
failure leaves as one line (a HubError's own, or the OS's reason): the window shows it in
its status line, never a traceback; only a failure nobody foresaw is logged with its stack.

A download is a PullJob the GUI and the worker share: the GUI sets `halt` (Pause, Cancel,
closing the window) from its own thread, which app.hub.download checks every tenth of a
second, so a pause never waits behind the transfer it means to stop.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal, Slot

from app.engine.gguf import human_size
from app.engine.models import ModelInfo, discover
from app.errors import LlamaDeskError
from app.hub import api, library, pull
from app.hub.api import RemoteFile
from app.hub.errors import Unreachable
from app.hub.fit import Prediction
from app.hub.quant import choose
from app.hub.resources import free_disk, free_ram, free_vram
from app.hub.search import FoundRepo, search

log = logging.getLogger("llamadesk.ui.models")

PARTS = 4  # ranged connections per download, as `llamadesk pull` uses by default
SEARCH_LIMIT = 10  # as `models search`: each repository costs a header read (a few MB)


def one_line(e: BaseException) -> str:
    """What a failure means, in one line for the status line."""
    if isinstance(e, LlamaDeskError):
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, OSError):
        where = f": {e.filename}" if e.filename else ""
        return f"{(e.strerror or str(e) or type(e).__name__)}{where}"
    log.error("unexpected failure in the Models window's worker", exc_info=e)
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


@dataclass
class Found:
    """A search's answer, with the free memory its fit labels were judged against."""

    text: str
    repos: list[FoundRepo]
    n_ctx: int
    ram_free: int | None
    vram_free: int | None


@dataclass
class Listing:
    """What is on disk. `others` are the GGUF files `llamadesk models` lists that no Hub pull
    made (the bundled model, files dropped in a models folder), read by the same discovery."""

    downloaded: list[library.Downloaded]
    partials: list[library.Partial]
    disk_free: int
    others: list[ModelInfo] = field(default_factory=list)


def other_models(downloaded: list[library.Downloaded]) -> list[ModelInfo]:
    """`llamadesk models`'s list, less the pulled files `downloaded` already shows."""
    pulled = {str(d.path.resolve()) for d in downloaded}
    return [m for m in discover() if m.path not in pulled]


@dataclass
class Checked:
    """One suggested model's file and fit, or why it could not be read."""

    spec: str
    file: RemoteFile | None = None
    fit: Prediction | None = None
    error: str | None = None


@dataclass
class PullJob:
    """One download: `halt` and `cancelled` are set by the GUI; `file`, `fit` and `resumed_at`
    by the worker once the file is known (before the `planned` signal)."""

    spec: str
    n_ctx: int
    gpu_layers: int
    halt: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    file: RemoteFile | None = None
    fit: Prediction | None = None
    resumed_at: int = 0

    def stop(self, cancel: bool = False) -> None:
        self.cancelled = self.cancelled or cancel
        self.halt.set()


class HubWorker(QObject):
    """Searches, fit checks, the library's listing and deletions (llamadesk-hub)."""

    found = Signal(object)  # Found
    checked = Signal(object)  # Checked, one per suggested model
    listed = Signal(object)  # Listing
    freed = Signal(str)  # one line: what a deletion gave back
    failed = Signal(str, str)  # what was asked ("search", "list", "delete"), one line

    @Slot(str, int, int)
    def search(self, text: str, n_ctx: int, gpu_layers: int) -> None:
        try:
            ram, vram = free_ram(), free_vram()
            with api.hub_errors():
                repos = search(text, limit=SEARCH_LIMIT, n_ctx=n_ctx, gpu_layers=gpu_layers)
            self.found.emit(Found(text, repos, n_ctx, ram, vram))
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.failed.emit("search", one_line(e))

    @Slot(object, int, int)
    def check(self, specs: list[str], n_ctx: int, gpu_layers: int) -> None:
        from app.hub.ranged import client

        unreachable = None  # once nothing answers, the other models are not asked for in turn
        with client() as http:
            for spec in specs:
                out = Checked(spec, error=unreachable)
                try:
                    if unreachable is None:
                        with api.hub_errors():
                            repo, sel = pull.parse_spec(spec)
                            files, _ = api.gguf_files(repo)
                            out.file = choose(files, sel)
                            out.fit = pull.fit_of(http, out.file, n_ctx, gpu_layers)
                except Unreachable as e:
                    out.error = unreachable = one_line(e)
                except Exception as e:  # noqa: BLE001 - said beside that model, the others still checked
                    out.error = one_line(e)
                self.checked.emit(out)

    @Slot()
    def list_library(self) -> None:
        try:
            got = library.downloaded()
            self.listed.emit(Listing(got, library.partials(), free_disk(library.root()), other_models(got)))
        except Exception as e:  # noqa: BLE001
            self.failed.emit("list", one_line(e))

    @Slot(object)
    def delete(self, files: list[library.Downloaded]) -> None:
        try:
            freed = library.delete(files)
            names = ", ".join(d.name.rsplit("/", 1)[-1] for d in files)
            self.freed.emit(f"Deleted {names}: {human_size(freed)} freed")
        except Exception as e:  # noqa: BLE001
            self.failed.emit("delete", one_line(e))
        self.list_library()

    @Slot(object)
    def discard(self, job: PullJob) -> None:
        """A paused download cancelled: its partial removed, as the download thread does for a running one."""
        try:
            freed = discard(job)
            self.freed.emit(f"Cancelled {job.spec}: its partial download is removed "
                            f"({human_size(freed)} freed)")
        except Exception as e:  # noqa: BLE001
            self.failed.emit("delete", one_line(e))
        self.list_library()

    @Slot(object)
    def remove_partials(self, parts: list[library.Partial]) -> None:
        try:
            freed = sum(library.remove_partial(p) for p in parts)
            names = ", ".join(p.name.rsplit("/", 1)[-1] for p in parts)
            self.freed.emit(f"Removed the partial download of {names}: {human_size(freed)} freed")
        except Exception as e:  # noqa: BLE001
            self.failed.emit("delete", one_line(e))
        self.list_library()


class PullWorker(QObject):
    """One download at a time, planned then transferred (llamadesk-download)."""

    planned = Signal(object)  # PullJob, its file known
    progress = Signal(object, str, int, int)  # PullJob, "download" | "verify", done, total
    done = Signal(object, str)  # PullJob, the installed model's path
    paused = Signal(object, int, int)  # PullJob, bytes kept, size
    cancelled = Signal(object, int)  # PullJob, bytes freed
    failed = Signal(object, str)  # PullJob, one line

    @Slot(object)
    def pull(self, job: PullJob) -> None:
        from app.hub.ranged import client

        try:
            with client() as http, api.hub_errors():
                plan = pull.plan(http, job.spec, n_ctx=job.n_ctx, gpu_layers=job.gpu_layers)
                job.file, job.fit, job.resumed_at = plan.file, plan.fit, plan.done
                self.planned.emit(job)
                if plan.installed is not None:
                    self.done.emit(job, str(plan.installed))
                    return
                if job.halt.is_set():  # paused or cancelled while the plan was read: nothing started
                    raise pull.Paused(plan.done, plan.file.size)
                report = lambda phase, done, total: self.progress.emit(job, phase, done, total)
                out = pull.run(http, plan, PARTS, report, job.halt)
            self.done.emit(job, str(out.path))
        except pull.Paused as e:
            if job.cancelled:
                self.cancelled.emit(job, discard(job))
            else:
                self.paused.emit(job, e.done, e.size)
        except Exception as e:  # noqa: BLE001 - one line in the window, whatever it was
            self.failed.emit(job, one_line(e))


def discard(job: PullJob) -> int:
    """Cancel: the job's partial file goes, so nothing of it is left taking space; bytes freed."""
    f = job.file
    if f is None:
        return 0
    return sum(library.remove_partial(p) for p in library.partials()
               if p.sha256 == f.sha256 and p.repo == f.repo)
