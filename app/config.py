"""The window's settings file: one JSON document under the user config dir.

Qt-free and path-injectable so tests (and the GUI benchmark) never touch the
user's real settings; the default path comes from app.paths, which follows
XDG_CONFIG_HOME. A damaged or hand-edited file must never stop the window
from opening, so unreadable values fall back to defaults one by one.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from app import paths
from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings

log = logging.getLogger("llamadesk.ui.config")

FILE_NAME = "settings.json"
# Changing these means building a new llama context, i.e. reloading the model.
RELOAD_FIELDS = ("n_ctx", "n_gpu_layers", "n_threads")


@dataclass
class AppConfig:
    streaming: bool = True
    model_path: str | None = None  # None: the bundled default model
    # Defaults come from the engine's own, so the window and the CLI agree.
    n_ctx: int = LoadOptions.n_ctx
    n_gpu_layers: int = LoadOptions.n_gpu_layers
    n_threads: int = 0  # 0: all cores
    max_tokens: int = GenerationSettings.max_tokens
    temperature: float = GenerationSettings.temperature
    top_p: float = GenerationSettings.top_p
    top_k: int = GenerationSettings.top_k
    min_p: float = GenerationSettings.min_p
    repeat_penalty: float = GenerationSettings.repeat_penalty
    seed: int = -1  # -1: a fresh random seed per reply

    def load_options(self) -> LoadOptions:
        return LoadOptions(n_ctx=self.n_ctx, n_gpu_layers=self.n_gpu_layers,
                           n_threads=self.n_threads or None)

    def generation(self) -> GenerationSettings:
        return GenerationSettings(
            max_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p,
            top_k=self.top_k, min_p=self.min_p, repeat_penalty=self.repeat_penalty,
            seed=None if self.seed < 0 else self.seed,
        )

    def needs_reload(self, other: AppConfig) -> list[str]:
        """Which load-time fields differ: those only take effect on a reload."""
        return [f for f in RELOAD_FIELDS if getattr(self, f) != getattr(other, f)]

    def validate(self) -> None:
        if self.n_ctx < 256:
            raise ValueError(f"context length must be at least 256, got {self.n_ctx}")
        if self.n_threads < 0:
            raise ValueError(f"threads must be 0 (auto) or more, got {self.n_threads}")
        self.generation().validate()


def default_path() -> Path:
    return paths.config_dir() / FILE_NAME


def load_config(path: Path | None = None) -> AppConfig:
    path = path or default_path()
    cfg = AppConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return cfg
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable settings file %s: %s", path, e)
        return cfg
    if not isinstance(data, dict):
        return cfg
    for f in fields(AppConfig):
        if f.name not in data:
            continue
        value, default = data[f.name], getattr(cfg, f.name)
        if f.name == "model_path":
            ok = value is None or isinstance(value, str)
        elif isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if ok:
            setattr(cfg, f.name, value)
        else:
            log.warning("ignoring bad setting %s=%r", f.name, value)
    try:
        cfg.validate()
    except ValueError as e:
        log.warning("settings file has invalid values (%s); using defaults", e)
        return AppConfig(streaming=cfg.streaming, model_path=cfg.model_path)
    return cfg


def save_config(cfg: AppConfig, path: Path | None = None) -> None:
    """Write atomically: a crash mid-write must not leave half a settings file."""
    path = path or default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".settings.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(cfg), f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
