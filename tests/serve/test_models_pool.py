"""The multi-model server's pool on its own (app.serve.pool): which model is unloaded to make
room, what is never unloaded, what is refused and why. Models here are stand-ins that record
their loads and closes; the real server with real models is test_serve_models.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.serve.pool import AllBusy, ModelPool, ModelSpec, NoRoom, NotLoaded, NotServed, Unusable

MB = 1_000_000


class Stub:
    def __init__(self, spec: ModelSpec, log: list, gate: threading.Event | None = None):
        if gate is not None:
            gate.wait(10)
        self.id, self.log, self.load_s = spec.id, log, 0.0
        log.append(("load", spec.id))

    def close(self) -> None:
        self.log.append(("close", self.id))


def pool(*needs: int, gate: threading.Event | None = None, **kw) -> tuple[ModelPool, list]:
    log: list = []
    specs = [ModelSpec(f"m{i}.gguf", Path(f"/models/m{i}.gguf"), n * MB) for i, n in enumerate(needs)]
    kw.setdefault("free", lambda: 10_000 * MB)
    return ModelPool(specs, lambda s: Stub(s, log, gate), **kw), log


def take(p: ModelPool, name: str):
    return p.hold(name, 10)


def test_lru_is_unloaded_past_max():
    p, log = pool(100, 100, 100, max_loaded=2)
    for name in ("m0.gguf", "m1.gguf", "m0.gguf"):
        take(p, name)
        p.release(name)
    take(p, "m2.gguf")  # m1 was used least recently
    assert log[-2:] == [("close", "m1.gguf"), ("load", "m2.gguf")]
    assert {e.spec.id: s for e, s in p.statuses()} == {"m0.gguf": "loaded", "m1.gguf": "unloaded",
                                                       "m2.gguf": "loaded"}
    p.close()


def test_a_busy_model_is_never_unloaded():
    p, log = pool(100, 100, max_loaded=1)
    take(p, "m0.gguf")  # held, as by a request in flight
    with pytest.raises(AllBusy, match="--models-max 1"):
        p.try_acquire("m1.gguf")
    p.release("m0.gguf")
    take(p, "m1.gguf")
    assert log == [("load", "m0.gguf"), ("close", "m0.gguf"), ("load", "m1.gguf")]
    p.close()


def test_memory_budget_unloads_or_refuses_naming_the_need():
    p, log = pool(300, 300, 900, 300, max_loaded=4, memory=700 * MB)
    for name in ("m0.gguf", "m1.gguf", "m0.gguf"):
        take(p, name)
        p.release(name)
    with pytest.raises(NoRoom, match=r"'m2.gguf' needs 900.0 MB"):
        p.try_acquire("m2.gguf")
    take(p, "m3.gguf")  # 300 + 300 + 300 is past 700: the least recently used (m1) goes
    assert log[-2:] == [("close", "m1.gguf"), ("load", "m3.gguf")]
    p.close()


def test_waiters_share_one_load_and_names_resolve():
    gate = threading.Event()
    p, log = pool(100, gate=gate)
    got: list = []
    threads = [threading.Thread(target=lambda n=n: got.append(take(p, n))) for n in ("m0.gguf", "m0")]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert p.statuses()[0][1] == "loading"
    gate.set()
    for t in threads:
        t.join(10)
    assert len(got) == 2 and got[0] is got[1] and log == [("load", "m0.gguf")]
    assert p.entries["m0.gguf"].busy == 2
    with pytest.raises(NotServed, match=r"'nope' does not exist \(this server has 'm0.gguf'\)"):
        p.try_acquire("nope")
    p.close()


def test_unload_on_request_and_when_idle():
    p, log = pool(100, 100, idle_s=0.3)
    take(p, "m0.gguf")
    with pytest.raises(AllBusy, match="answering 1"):
        p.unload("m0.gguf")
    p.release("m0.gguf")
    p.unload("m0.gguf").result(5)
    with pytest.raises(NotLoaded):
        p.unload("m0.gguf")
    take(p, "m1.gguf")
    p.release("m1.gguf")
    deadline = time.monotonic() + 5
    while p.statuses()[1][1] != "unloaded":
        assert time.monotonic() < deadline, "an idle model was not unloaded"
        time.sleep(0.05)
    assert ("close", "m1.gguf") in log
    p.close()


def test_a_failed_load_is_said_and_kept():
    def broken(spec):
        raise RuntimeError("bad tensor data")

    p = ModelPool([ModelSpec("m0.gguf", Path("/m0.gguf"), MB)], broken, free=lambda: None)
    with pytest.raises(Exception, match=r"'m0\.gguf' cannot be loaded: bad tensor data"):
        take(p, "m0.gguf")
    assert p.entries["m0.gguf"].failed == "bad tensor data" and p.statuses()[0][1] == "unloaded"
    p.close()


def test_an_unusable_file_is_never_loaded_nor_counted_among_the_served():
    """A --models-dir file whose header could not be read is held with its reason: every way of
    asking for it (a request, a batch's hold, an unload, its stem) is refused with that reason."""
    log: list = []
    junk = ModelSpec("junk.gguf", Path("/models/junk.gguf"), 0, error="not a GGUF file (wrong magic bytes)")
    p = ModelPool([junk, ModelSpec("m0.gguf", Path("/models/m0.gguf"), MB)], lambda s: Stub(s, log),
                  free=lambda: None)
    assert p.ids == ["m0.gguf"]
    why = (r"'junk\.gguf' cannot be served: not a GGUF file \(wrong magic bytes\) "
           r"\(this server has 'm0\.gguf'\)")
    for ask in (p.try_acquire, lambda n: p.hold(n, 1), p.unload):
        for name in ("junk.gguf", "junk"):
            with pytest.raises(Unusable, match=why) as e:
                ask(name)
            assert e.value.status == 404 and e.value.code == "model_unusable"
    with pytest.raises(NotServed, match=r"this server has 'm0\.gguf'\)$"):
        p.find("nope")
    take(p, "m0.gguf")
    assert log == [("load", "m0.gguf")]
    assert [(e.spec.id, s, e.failed) for e, s in p.statuses()] == \
        [("junk.gguf", "unloaded", junk.error), ("m0.gguf", "loaded", None)]
    p.close()
