"""The models a multi-model server holds: loaded on demand, the least recently used let go first.

`llamadesk serve` with several `--model` options (or `--models-dir`) routes each
request by its `model` to one of these. A model is loaded when a request (or a
batch, or POST /models/load) first asks for it, on the pool's one loader thread
(`llamadesk-serve-load`: one load at a time, so two never race for the same
memory). Before a load the pool makes room: past `max_loaded` models, or past
the memory the new one needs (predicted from its GGUF header, app.hub.fit),
the idle models are unloaded, least recently used first. A model that holds a
request or a batch is never unloaded under it; when only busy models could
make room, the request is refused (AllBusy, a 503 to retry), and when even
unloading everything would not, it is refused for good (NoRoom, a 503 naming
the memory the model needs). A model idle for `idle_s` is unloaded by the
pool's timer thread.

The state machine of a model: unloaded -> loading -> loaded -> unloading ->
unloaded; a load that fails goes back to unloaded with its reason kept
(GET /models shows it). A file found unusable before the server started (a
--models-dir file that is no GGUF, or a truncated one) is held with its
reason and never loaded: one bad file in a folder costs only itself, and
every request naming it is told why. Everything here is plain threads and a
lock: the event loop calls `try_acquire`, which never blocks, and awaits the
future it may return; a batch's thread waits on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from app.engine.gguf import human_size
from app.errors import LlamaDeskError

log = logging.getLogger("llamadesk.serve")


class Served(Protocol):
    """A loaded model as the server uses it; close() frees it (its contexts, then its weights)."""

    load_s: float

    def close(self) -> None: ...


@dataclass
class ModelSpec:
    """A model the server may load: its id (the file's name, as a single-model server calls
    it), its file, and the memory a load of it takes (app.hub.fit's prediction), in bytes."""

    id: str
    path: Path
    need: int
    size: int = 0
    header: object = None  # the GGUF header read for `need` (a load spares reading it again)
    stamp: tuple = ()  # (size, mtime) the header was read at
    error: str | None = None  # why the file cannot be served at all, found when it was read


class PoolError(LlamaDeskError):
    """A model that cannot be served now, or at all; `status` is the HTTP answer's."""

    status = 503
    code = "model_unavailable"
    retry = False


class NotServed(PoolError):
    status = 404
    code = "model_not_found"


class Unusable(NotServed):
    """A model the server knows but cannot serve: not among those it serves, as a 404 says,
    and the reason why, so a client is not sent to retry."""

    code = "model_unusable"


class NotLoaded(PoolError):
    status = 400
    code = "model_not_loaded"


class NoRoom(PoolError):
    code = "model_too_large"


class AllBusy(PoolError):
    code = "models_busy"
    retry = True


class LoadFailed(PoolError):
    code = "model_load_failed"


@dataclass
class Entry:
    spec: ModelSpec
    status: str = "unloaded"  # unloaded | loading | loaded | unloading
    served: Served | None = None
    busy: int = 0  # requests and batches holding it
    last_used: float = 0.0
    future: Future | None = None  # set while loading or unloading
    failed: str | None = None  # why its last load failed
    load_s: float | None = None
    loads: int = 0
    loaded_at: float | None = None


@dataclass
class PoolEvents:
    """What /metrics counts: a load that took `seconds`, an unload and why (lru, memory, idle,
    request, shutdown)."""

    loaded: Callable[[str, float], None] = lambda _mid, _s: None
    unloaded: Callable[[str, str], None] = lambda _mid, _why: None


def free_memory() -> int | None:
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency
        return None
    return int(psutil.virtual_memory().available)


@dataclass
class ModelPool:
    specs: list[ModelSpec]
    build: Callable[[ModelSpec], Served]
    max_loaded: int = 4
    idle_s: float = 0.0  # 0: never unloaded for idleness
    memory: int | None = None  # bytes the loaded models may take together; None: what is free
    events: PoolEvents = field(default_factory=PoolEvents)
    free: Callable[[], int | None] = free_memory

    def __post_init__(self) -> None:
        self.entries = {s.id: Entry(s, failed=s.error) for s in self.specs}
        self._lock = threading.Lock()
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llamadesk-serve-load")
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        if self.idle_s > 0:
            self._timer = threading.Thread(target=self._sweep_loop, name="llamadesk-serve-idle", daemon=True)
            self._timer.start()

    @property
    def ids(self) -> list[str]:
        """The models served; the unusable ones are not."""
        return [i for i, e in self.entries.items() if e.spec.error is None]

    def find(self, name) -> Entry:
        """The model a request names: its id, or its file name without .gguf (llama-server's
        name for a file of its --models-dir)."""
        e = self.entries.get(name) if isinstance(name, str) else None
        if e is None and isinstance(name, str):
            e = next((x for x in self.entries.values() if x.spec.path.stem == name), None)
        served = ", ".join(repr(i) for i in self.ids)
        if e is None:
            if name is None:
                raise NotServed(f"say which model: this server has {served}")
            raise NotServed(f"The model {name!r} does not exist (this server has {served})")
        if e.spec.error is not None:
            raise Unusable(f"the model {e.spec.id!r} cannot be served: {e.spec.error} (this server has "
                           f"{served})")
        return e

    # -- holding a model --------------------------------------------------------
    def try_acquire(self, name) -> Served | tuple[Future, bool]:
        """The model, held (release it after), if it is loaded; else the future to wait on and
        whether it is this caller's own load (whose result is the model, held already). Never
        blocks; PoolError when the model cannot be served now."""
        with self._lock:
            e = self.find(name)
            if e.status == "loaded":
                e.busy += 1
                e.last_used = time.monotonic()
                return e.served
            if e.status in ("loading", "unloading"):
                return e.future, False
            victims = self._room_for(e)
            for v, _ in victims:
                v.status, v.future = "unloading", Future()
            e.status, e.failed = "loading", None
            e.future = self._loader.submit(self._load, e, victims)
            return e.future, True

    def hold(self, name, timeout: float) -> Served:
        """try_acquire, waiting (a batch's thread): up to `timeout` for a load, and for busy
        models to make room."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.try_acquire(name)
            except AllBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
                continue
            if not isinstance(got, tuple):
                return got
            fut, mine = got
            try:
                res = fut.result(max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                if mine:
                    fut.add_done_callback(self.release_when_loaded(name))
                raise PoolError(f"the model {self.find(name).spec.id!r} is still loading after "
                                f"{timeout:g} s") from None
            if mine:
                return res

    def release(self, name) -> None:
        with self._lock:
            e = self.find(name)
            e.busy = max(e.busy - 1, 0)
            e.last_used = time.monotonic()

    def release_when_loaded(self, name) -> Callable[[Future], None]:
        """For a load whose caller gave up waiting: the hold it brings is let go when it ends."""
        def done(f: Future) -> None:
            if not f.cancelled() and f.exception() is None:
                self.release(name)
        return done

    # -- on the loader thread -----------------------------------------------------
    def _load(self, e: Entry, victims: list[tuple[Entry, str]]) -> Served:
        for v, why in victims:
            self._close(v, why)
        t0 = time.perf_counter()
        try:
            served = self.build(e.spec)
        except Exception as err:  # noqa: BLE001 - whatever stops a load is said to its requests
            with self._lock:
                e.status, e.failed, e.served = "unloaded", str(err), None
            log.warning("model %s failed to load: %s", e.spec.id, err)
            raise LoadFailed(f"the model {e.spec.id!r} cannot be loaded: {err}") from None
        seconds = time.perf_counter() - t0
        with self._lock:
            e.status, e.served, e.load_s, e.loaded_at = "loaded", served, seconds, time.time()
            e.loads += 1
            e.busy += 1  # held for the request that asked for the load
            e.last_used = time.monotonic()
        log.info("model %s loaded in %.2f s", e.spec.id, seconds)
        self.events.loaded(e.spec.id, seconds)
        return served

    def _close(self, v: Entry, why: str) -> None:
        served = v.served
        try:
            if served is not None:
                served.close()
        finally:
            with self._lock:
                v.status, v.served = "unloaded", None
                fut, v.future = v.future, None
            if fut is not None and not fut.done():
                fut.set_result(None)
        log.info("model %s unloaded (%s)", v.spec.id, why)
        self.events.unloaded(v.spec.id, why)

    # -- making room (under the lock) -------------------------------------------------
    def _live(self) -> list[Entry]:
        return [x for x in self.entries.values() if x.status in ("loaded", "loading")]

    def _room_for(self, e: Entry) -> list[tuple[Entry, str]]:
        """The idle models to unload before `e` loads, least recently used first, and why
        (lru: past max_loaded; memory: for the memory `e` needs)."""
        kept = [x for x in self._live() if x is not e]
        idle = sorted((x for x in kept if x.status == "loaded" and x.busy == 0), key=lambda x: x.last_used)
        victims: list[tuple[Entry, str]] = []
        free = None if self.memory is not None else self.free()
        while True:
            too_many = len(kept) + 1 > self.max_loaded
            short = self._short(e, kept, [v for v, _ in victims], free)
            if not too_many and short <= 0:
                return victims
            if not idle:
                break
            v = idle.pop(0)
            victims.append((v, "lru" if too_many else "memory"))
            kept.remove(v)
        if short > 0 and self._short(e, [], [*(v for v, _ in victims), *kept], free) > 0:
            have = self.memory if self.memory is not None else free
            where = "the --models-memory budget is" if self.memory is not None else "this machine has"
            raise NoRoom(f"the model {e.spec.id!r} needs {human_size(e.spec.need)} of memory and "
                         f"{where} {human_size(have or 0)} free even with every other model unloaded")
        busy = ", ".join(repr(x.spec.id) for x in kept)
        why = (f"--models-max {self.max_loaded} models are loaded" if too_many
               else f"the model {e.spec.id!r} needs {human_size(e.spec.need)} of memory")
        raise AllBusy(f"{why} and the ones that would make room are answering requests ({busy}); "
                      "retry shortly")

    def _short(self, e: Entry, kept: list[Entry], freed: list[Entry], free: int | None) -> int:
        """Bytes still missing for `e` with `kept` loaded and `freed` unloaded; <= 0 when it fits."""
        if self.memory is not None:
            return sum(x.spec.need for x in kept) + e.spec.need - self.memory
        if free is None:
            return 0
        return e.spec.need - free - sum(x.spec.need for x in freed)

    # -- asked for -------------------------------------------------------------------
    def unload(self, name, why: str = "request") -> Future:
        """Unload an idle model (on the loader thread); the future ends when it is gone."""
        with self._lock:
            e = self.find(name)
            if e.status == "unloading":
                return e.future
            if e.status != "loaded":
                raise NotLoaded(f"the model {e.spec.id!r} is not loaded ({e.status})")
            if e.busy:
                err = AllBusy(f"the model {e.spec.id!r} is answering {e.busy} request(s) or a batch; "
                              "unload it when they end")
                err.status, err.code = 409, "model_busy"
                raise err
            e.status, e.future = "unloading", Future()
            fut = e.future
        self._loader.submit(self._close, e, why)
        return fut

    def _sweep_loop(self) -> None:
        tick = min(max(self.idle_s / 4, 0.05), 5.0)
        while not self._stop.wait(tick):
            now = time.monotonic()
            with self._lock:
                stale = [x for x in self.entries.values()
                         if x.status == "loaded" and x.busy == 0 and now - x.last_used >= self.idle_s]
            for x in stale:
                try:
                    self.unload(x.spec.id, "idle")
                except PoolError:
                    pass  # taken again meanwhile

    def statuses(self) -> list[tuple[Entry, str]]:
        with self._lock:
            return [(e, e.status) for e in self.entries.values()]

    def close(self) -> None:
        """Unload everything (at the server's end), on the loader thread, in order."""
        self._stop.set()
        with self._lock:
            loaded = [e for e in self.entries.values() if e.status == "loaded"]
            for e in loaded:
                e.status, e.future = "unloading", Future()
        for e in loaded:
            self._loader.submit(self._close, e, "shutdown")
        self._loader.shutdown(wait=True)
        for e in self.entries.values():  # loaded by a load that was under way
            if e.status == "loaded":
                self._close(e, "shutdown")
        if self._timer is not None:
            self._timer.join(5)
