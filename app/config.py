"""The window's settings file: one JSON document under the user config dir.

Qt-free and path-injectable so tests (and the GUI benchmark) never touch the
user's real settings; the default path comes from app.paths, which follows
XDG_CONFIG_HOME. A damaged or hand-edited file must never stop the window
from opening, and must never be lost either: each value that cannot be used
falls back to its default alone (the others are kept), the file as it was is
copied aside before the window saves over it, and the window says what was
reset and why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from app import atomic_file, paths
from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError

log = logging.getLogger("llamadesk.ui.config")

FILE_NAME = "settings.json"
# Changing these means building a new llama context, i.e. reloading the model.
RELOAD_FIELDS = ("n_ctx", "n_gpu_layers", "n_threads", "loaded_draft")


PROMPT_FORMATS = ("chat", "transcript")
# The window's colours: the desktop's (whatever Qt's platform gives), or Fusion's light or dark.
THEMES = ("system", "light", "dark")
SPECULATIVE = ("off", "ngram", "draft")
OPTIONAL_TEXT = ("model_path", "active_endpoint", "draft_model")  # a string, or null: none


@dataclass(frozen=True)
class SavedEndpoint:
    """A server the user connected to, as the settings file keeps it: never its API key
    (that lives in the keyring, or in the environment variable named here)."""

    base_url: str
    model: str | None = None  # None: the server's only model
    prompt_format: str = "chat"
    api_key_env: str | None = None

    @classmethod
    def from_json(cls, d) -> SavedEndpoint:
        """Raises ValueError naming what is wrong with one saved entry."""
        if not isinstance(d, dict) or not isinstance(d.get("base_url"), str):
            raise ValueError("an endpoint needs a base_url")
        try:
            url = Endpoint.parse(d["base_url"]).base_url
        except EndpointConfigError as e:
            raise ValueError(str(e)) from None
        model, fmt, env = d.get("model"), d.get("prompt_format", "chat"), d.get("api_key_env")
        if model is not None and not isinstance(model, str):
            raise ValueError(f"{url}: model must be a string")
        if fmt not in PROMPT_FORMATS:
            raise ValueError(f"{url}: prompt_format must be chat or transcript")
        if env is not None and not isinstance(env, str):
            raise ValueError(f"{url}: api_key_env must be a string")
        return cls(url, model or None, fmt, env or None)

    @property
    def label(self) -> str:
        host = Endpoint.parse(self.base_url).host
        return f"{host} · {self.model}" if self.model else host


@dataclass
class AppConfig:
    streaming: bool = True
    model_path: str | None = None  # None: the bundled default model
    # Defaults come from the engine's own, so the window and the CLI agree.
    n_ctx: int = LoadOptions.n_ctx
    n_gpu_layers: int = LoadOptions.n_gpu_layers
    n_threads: int = 0  # 0: auto (prefill on all cores, decode on all but one)
    max_tokens: int = GenerationSettings.max_tokens
    temperature: float = GenerationSettings.temperature
    top_p: float = GenerationSettings.top_p
    top_k: int = GenerationSettings.top_k
    min_p: float = GenerationSettings.min_p
    repeat_penalty: float = GenerationSettings.repeat_penalty
    seed: int = -1  # -1: a fresh random seed per reply
    dry_multiplier: float = GenerationSettings.dry_multiplier
    preamble: bool = GenerationSettings.preamble
    speculative: str = "off"  # one of SPECULATIVE: "ngram" guesses from the conversation's text
    draft_model: str | None = None  # the GGUF that guesses when speculative is "draft"
    endpoints: list[dict] = field(default_factory=list)  # SavedEndpoint.from_json each
    active_endpoint: str | None = None  # base_url of the server in use; None: model_path, locally
    serve_port: int = 8765  # the window's own server (the Server panel), on 127.0.0.1
    theme: str = "system"  # one of THEMES
    first_launch_done: bool = False  # the first-launch panel (app/ui/models) was shown
    notices_seen: list[str] = field(default_factory=list)  # a model caveat's explanation, said once

    def saved_endpoints(self) -> list[SavedEndpoint]:
        return [SavedEndpoint.from_json(d) for d in self.endpoints]

    def remember_endpoint(self, ep: SavedEndpoint) -> None:
        """Saved first in the list (the picker shows the latest first), one entry per URL."""
        rest = [d for d in self.endpoints if d.get("base_url") != ep.base_url]
        self.endpoints = [asdict(ep), *rest][:20]
        self.active_endpoint = ep.base_url

    @property
    def loaded_draft(self) -> str | None:
        """The draft model loaded with the model: only while speculation uses it."""
        return self.draft_model if self.speculative == "draft" else None

    def load_options(self) -> LoadOptions:
        return LoadOptions(n_ctx=self.n_ctx, n_gpu_layers=self.n_gpu_layers,
                           n_threads=self.n_threads or None, spare_core=True)

    def generation(self) -> GenerationSettings:
        return GenerationSettings(
            max_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p,
            top_k=self.top_k, min_p=self.min_p, repeat_penalty=self.repeat_penalty,
            seed=None if self.seed < 0 else self.seed, dry_multiplier=self.dry_multiplier,
            preamble=self.preamble, speculative=None if self.speculative == "off" else self.speculative,
        )

    def needs_reload(self, other: AppConfig) -> list[str]:
        """Which load-time fields differ: those only take effect on a reload."""
        return [f for f in RELOAD_FIELDS if getattr(self, f) != getattr(other, f)]

    def validate(self) -> None:
        if self.n_ctx < 256:
            raise ValueError(f"context length must be at least 256, got {self.n_ctx}")
        if self.n_threads < 0:
            raise ValueError(f"threads must be 0 (auto) or more, got {self.n_threads}")
        if not 1024 <= self.serve_port <= 65535:
            raise ValueError(f"the server port must be 1024 to 65535, got {self.serve_port}")
        if self.speculative not in SPECULATIVE:
            raise ValueError(f"speculative decoding must be one of {', '.join(SPECULATIVE)}, "
                             f"got {self.speculative!r}")
        if self.speculative == "draft" and not self.draft_model:
            raise ValueError("speculative decoding with a draft model needs one: choose its file")
        if self.theme not in THEMES:
            raise ValueError(f"the theme must be one of {', '.join(THEMES)}, got {self.theme!r}")
        self.generation().validate()


def default_path() -> Path:
    return paths.config_dir() / FILE_NAME


@dataclass
class ConfigLoad:
    """The settings as read, and what could not be used from the file."""

    config: AppConfig
    problems: list[str] = field(default_factory=list)  # one phrase per value reset or file unread
    kept_copy: Path | None = None  # the file as it was, when anything in it was not used

    def message(self) -> str | None:
        """One line for the window's message bar; None when the file was fine."""
        if not self.problems:
            return None
        where = f"; the old file is kept as {self.kept_copy}" if self.kept_copy else ""
        return f"Settings: {'; '.join(self.problems)}{where}."


def _typed(name: str, value, default):
    """The value if it has the setting's type (ints are fine for floats), else None."""
    if name in OPTIONAL_TEXT:
        return value if value is None or isinstance(value, str) else None
    if name == "endpoints":  # its entries are checked one by one in _read_values
        return value if isinstance(value, list) else None
    if name == "notices_seen":
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None
    if isinstance(default, str):
        return value if isinstance(value, str) else None
    if isinstance(value, bool) or isinstance(default, bool):
        return value if isinstance(value, bool) and isinstance(default, bool) else None
    if isinstance(default, float):
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, int) else None


def _read_values(data: dict) -> tuple[AppConfig, list[str]]:
    """Take each usable value; every other one keeps its default and is named."""
    cfg, problems = AppConfig(), []
    for f in fields(AppConfig):
        if f.name not in data:
            continue
        value, default = data[f.name], getattr(cfg, f.name)
        typed = _typed(f.name, value, default)
        if typed is None and not (f.name in OPTIONAL_TEXT and value is None):
            problems.append(f"{f.name} {json.dumps(value)} is not a {type(default).__name__}, "
                            f"reset to {json.dumps(default)}")
            continue
        if f.name == "endpoints":
            typed = []
            for d in value:
                try:
                    typed.append(asdict(SavedEndpoint.from_json(d)))
                except ValueError as e:
                    problems.append(f"saved endpoint {json.dumps(d)[:80]} dropped ({e})")
        try:  # alone on the defaults, so a bad value is told apart from the others
            replace(AppConfig(), **{f.name: typed}).validate()
        except (ValueError, OverflowError) as e:
            problems.append(f"{f.name} {json.dumps(value)} reset to {json.dumps(default)} ({e})")
            continue
        setattr(cfg, f.name, typed)
    return cfg, problems


def read_config(path: Path | None = None) -> ConfigLoad:
    path = path or default_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ConfigLoad(AppConfig())
    except OSError as e:  # unreadable is not damaged: the file is left alone, and said so
        return ConfigLoad(AppConfig(), [f"{path} cannot be read ({e.strerror or e}); using defaults"])
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        reason = f"{path} is not valid JSON ({e}); every setting was reset to its default"
        return ConfigLoad(AppConfig(), [reason], atomic_file.keep_aside(path))
    if not isinstance(data, dict):
        reason = f"{path} does not hold a settings object; every setting was reset to its default"
        return ConfigLoad(AppConfig(), [reason], atomic_file.keep_aside(path))
    cfg, problems = _read_values(data)
    for problem in problems:
        log.warning("settings file %s: %s", path, problem)
    return ConfigLoad(cfg, problems, atomic_file.keep_aside(path) if problems else None)


def load_config(path: Path | None = None) -> AppConfig:
    return read_config(path).config


def save_config(cfg: AppConfig, path: Path | None = None) -> None:
    """Write atomically: a crash mid-write must not leave half a settings file."""
    path = path or default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(path, json.dumps(asdict(cfg), indent=2))
