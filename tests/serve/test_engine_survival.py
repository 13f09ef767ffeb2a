"""The server's engine thread serves every client: a failure in one request's work ends that
request with its error, an exception in a step ends the step's requests, and the next request is
served; an engine that stops stepping is what /health reports. The real model on a real
ServeEngine, /health over a real socket."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
import uvicorn

from app.engine.events import TextDelta
from app.engine.grammar import Constraint
from app.engine.loader import LoadOptions, load_model
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.serve import engine_host
from app.serve.api import create_app
from app.serve.engine_host import ServeEngine
from app.slots.engine import BatchEngine
from app.slots.types import RequestDone, SlotRequest
from tests.serve.test_hostile_constraints import LATE


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=256))
    yield m
    m.close()


@pytest.fixture
def host(model):
    h = ServeEngine(model, n_slots=2, slot_ctx=512, prompt_cache=False)
    yield h
    h.close()


def _ask(text: str, max_tokens: int = 8, constraint: Constraint | None = None) -> SlotRequest:
    return SlotRequest("", [MessageBody("user", text)],
                       GenerationSettings(max_tokens=max_tokens, temperature=0, constraint=constraint))


def _done(host: ServeEngine, req: SlotRequest, timeout: float = 120):
    """Submit online and wait for the RequestDone's result."""
    got: list = []
    ended = threading.Event()

    def sink(ev) -> None:
        if isinstance(ev, RequestDone):
            got.append(ev.result)
            ended.set()

    host.submit_online(req, sink)
    assert ended.wait(timeout), "the request never ended"
    return got[0]


def test_a_constraint_failing_mid_reply_ends_only_its_own_request(model):
    eng = BatchEngine(model, n_slots=2, slot_ctx=512)
    try:
        eng.submit_many([_ask("Write the value.", 60, Constraint.json_schema(LATE)),
                         _ask("Name a colour.", 12)])
        bad, good = sorted(eng.run(), key=lambda r: r.stats.error is None)
    finally:
        eng.free()
    assert bad.stats.stop_reason == "error" and bad.stats.error_kind == "invalid_request"
    assert bad.stats.error.startswith("the constraint failed after") and bad.stats.completion_tokens > 4
    assert good.stats.error is None and good.stats.completion_tokens > 0 and good.text


def test_an_exception_in_a_step_ends_that_steps_requests_and_the_engine_goes_on(host, monkeypatch):
    real = BatchEngine._gather
    calls = [0]

    def gather(self, live):
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("injected")
        return real(self, live)

    monkeypatch.setattr(BatchEngine, "_gather", gather)
    failed = _done(host, _ask("Tell me a story.", 40))
    assert failed.stats.stop_reason == "error" and "RuntimeError: injected" in failed.stats.error
    assert host.stats.failed_runs == 1 and host.thread.is_alive()
    served = _done(host, _ask("Name a colour."))
    assert served.stats.error is None and served.text and served.stats.completion_tokens > 0
    assert host.stalled() is None


def _listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_health_says_so_when_the_engine_stops_stepping(host, monkeypatch):
    monkeypatch.setattr(engine_host, "STALL_S", 0.5)
    app = create_app(host, "m")
    sock = _listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    serving.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    release, holding = threading.Event(), threading.Event()

    def wedge(ev) -> None:  # the engine thread calls sinks: this one holds it, as a hang would
        if isinstance(ev, TextDelta) and not holding.is_set():
            holding.set()
            release.wait(60)

    try:
        while not server.started:
            time.sleep(0.05)
        assert httpx.get(base + "/health", timeout=5).json() == {"status": "ok"}
        host.submit_online(_ask("Tell me a story.", 30), wedge)
        assert holding.wait(60)
        time.sleep(1.0)
        r = httpx.get(base + "/health", timeout=5)
        assert r.status_code == 503 and "has not stepped" in r.json()["error"], r.text
        release.set()
        assert _done(host, _ask("Name a colour.")).stats.error is None
        assert httpx.get(base + "/health", timeout=5).json() == {"status": "ok"}
    finally:
        release.set()
        server.should_exit = True
        serving.join(10)
        sock.close()
