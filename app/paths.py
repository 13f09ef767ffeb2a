"""Every file LlamaDesk writes lives under the platform's per-user dirs.

Resolving them in one module lets tests redirect all writes with the XDG_*
variables (platformdirs honours them on Linux), so no test touches a real home.
"""

from __future__ import annotations

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


def user_models_dir() -> Path:
    """Where the default model is assembled and where users may keep GGUFs."""
    return _ensure(str(Path(_dirs().user_data_dir) / "models"))


def repo_models_dir() -> Path | None:
    """The checkout's models/ folder, present only when run from source."""
    p = Path(__file__).resolve().parent.parent / "models"
    return p if p.is_dir() else None
