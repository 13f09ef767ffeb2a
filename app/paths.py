"""Every file LlamaDesk writes lives under the platform's per-user dirs.

Resolving them in one module lets tests redirect all writes with the XDG_*
variables (platformdirs honours them on Linux), so no test touches a real home.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import PlatformDirs

APP_NAME = "llamadesk"


def _dirs() -> PlatformDirs:
    # Built on each call, not cached: tests change XDG_* between cases.
    return PlatformDirs(APP_NAME, appauthor=False)


def _ensure(path: str) -> Path:
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


def data_dir() -> Path:
    return _ensure(_dirs().user_data_dir)


def config_dir() -> Path:
    return _ensure(_dirs().user_config_dir)


def log_dir() -> Path:
    return _ensure(_dirs().user_log_dir)


def cache_dir() -> Path:
    """Files that can be rebuilt at any time (the prompt cache, the model hashes).

    XDG_CACHE_HOME is honoured on every platform, not only where platformdirs
    reads it, so a benchmark that points it at a private folder can never
    clear a user's real cache on macOS or Windows.
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        return _ensure(str(Path(xdg) / APP_NAME))
    return _ensure(_dirs().user_cache_dir)


def prompt_cache_dir() -> Path:
    """Saved KV states of shared prompt prefixes (app.engine.prompt_cache)."""
    return _ensure(str(cache_dir() / "prompt-cache"))


def user_models_dir(create: bool = True) -> Path:
    """Where the default model is assembled and where users may keep GGUFs.

    Only assembling the model creates it: listing and looking (create=False)
    must work on a read-only data folder too.
    """
    p = Path(_dirs().user_data_dir) / "models"
    return _ensure(str(p)) if create else p


def repo_models_dir() -> Path | None:
    """The checkout's models/ folder, present only when run from source."""
    p = Path(__file__).resolve().parent.parent / "models"
    return p if p.is_dir() else None
