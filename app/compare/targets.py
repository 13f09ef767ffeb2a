"""What is compared: a local model file with its settings, or a remote endpoint.

`--set KEY=VALUE` names the load and sampling settings in the words a user
types (threads, ctx, gpu_layers, flash_attn, kv, batch, temperature, ...),
each checked here so a bad value is refused before anything loads. A target
opens through app.chat.engines.open_engine like every other front end's
engine, so an endpoint's key, model and prompt format reach it as they reach
`ask`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from app.chat.engines import EngineTarget
from app.engine.loader import MAX_BATCH, MAX_N_CTX, MAX_THREADS, LoadOptions
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.keys import key_from_env

LOAD_KEYS = {"threads": "n_threads", "ctx": "n_ctx", "gpu_layers": "n_gpu_layers", "flash_attn": "flash_attn",
             "kv": "kv_type", "batch": "n_batch", "ubatch": "n_ubatch"}
SAMPLING_KEYS = {"temperature": float, "top_p": float, "top_k": int, "min_p": float, "repeat_penalty": float,
                 "seed": int, "max_tokens": int}
# What llama.cpp can hold, checked before anything loads (ubatch=2147483647 asked it for 2 PiB).
LOAD_RANGES = {"threads": (1, MAX_THREADS), "ctx": (256, MAX_N_CTX), "gpu_layers": (-1, 10_000),
               "batch": (1, MAX_BATCH), "ubatch": (1, MAX_BATCH)}
MIN_TARGETS, MAX_TARGETS = 2, 6
# How `llamadesk compare` names the options a failing endpoint asks for (app.remote.errors.explain):
# its own, which follow the --endpoint they apply to, not ask's of the same names.
OPTION_WORDS = {"api_key": "--api-key-env VAR after its --endpoint",
                "model": "--remote-model NAME after its --endpoint"}


@dataclass
class Target:
    kind: str  # "model" or "endpoint"
    where: str  # a path ("" for the bundled default model), or a base URL
    load: LoadOptions = field(default_factory=lambda: LoadOptions(n_ctx=4096))
    sampling: dict = field(default_factory=dict)  # overrides of the comparison's settings
    settings_text: list[str] = field(default_factory=list)  # the --set items as typed
    remote_model: str | None = None
    prompt_format: str = "chat"
    # kind "endpoint": the URL, stall timeout and API key (the key is never saved or shown)
    endpoint: Endpoint | None = None

    @classmethod
    def for_endpoint(cls, endpoint: Endpoint, remote_model: str | None = None,
                     prompt_format: str = "chat") -> Target:
        return cls("endpoint", endpoint.base_url, remote_model=remote_model, prompt_format=prompt_format,
                   endpoint=endpoint)

    def engine_target(self) -> EngineTarget:
        """What open_engine opens; every run starts from an empty cache, so no saved prefixes."""
        if self.kind == "endpoint":
            return EngineTarget(endpoint=self.endpoint or Endpoint.parse(self.where),
                                remote_model=self.remote_model, prompt_format=self.prompt_format)
        return EngineTarget(self.where or None, self.load, prompt_cache=False)

    def without_settings(self) -> Target:
        """The same model or endpoint with no --set items applied."""
        return replace(self, load=LoadOptions(n_ctx=4096), sampling={}, settings_text=[])

    @property
    def label(self) -> str:
        if self.kind == "model":
            base = Path(self.where).name if self.where else "bundled default model"
        else:
            base = self.where
        return base + (f" [{', '.join(self.settings_text)}]" if self.settings_text else "")

    def settings(self, base: GenerationSettings) -> GenerationSettings:
        s = replace(base, **self.sampling)
        s.validate()
        return s

    def describe(self) -> dict:
        """The settings that make this target what it is, for the record and the exports."""
        if self.kind == "endpoint":
            return {"endpoint": self.where, "remote_model": self.remote_model,
                    "prompt_format": self.prompt_format, **self.sampling}
        lo = self.load
        return {"model": self.where, "threads": lo.threads(), "ctx": lo.n_ctx, "gpu_layers": lo.n_gpu_layers,
                "flash_attn": lo.flash_attn, "kv": lo.kv_type, "batch": lo.n_batch,
                "ubatch": min(lo.n_ubatch, lo.n_batch), **self.sampling}


def _bool(key: str, v: str) -> bool:
    low = v.strip().lower()
    if low in ("1", "true", "on", "yes"):
        return True
    if low in ("0", "false", "off", "no"):
        return False
    raise ValueError(f"--set {key}= takes on or off, got {v!r}")


def _int(key: str, v: str, lo: int, hi: int = 2**31 - 1) -> int:
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"--set {key}= takes a whole number, got {v!r}") from None
    if not lo <= n <= hi:
        raise ValueError(f"--set {key}= must be between {lo} and {hi}, got {n}")
    return n


def apply_set(t: Target, item: str) -> None:
    """One `KEY=VALUE` onto target `t`; ValueError names what is wrong."""
    key, sep, value = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key:
        raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
    if key in SAMPLING_KEYS:
        try:
            t.sampling[key] = SAMPLING_KEYS[key](value)
        except ValueError:
            raise ValueError(f"--set {key}= takes a number, got {value!r}") from None
        replace(GenerationSettings(), **t.sampling).validate()
    elif key in LOAD_KEYS:
        if t.kind == "endpoint":
            raise ValueError(f"--set {key}= is a load setting; an endpoint's server decides it")
        if key == "flash_attn":
            t.load.flash_attn = _bool(key, value)
        elif key == "kv":
            if value not in ("f16", "q8_0", "q4_0"):
                raise ValueError(f"--set kv= takes f16, q8_0 or q4_0, got {value!r}")
            t.load.kv_type = value
        else:
            lo, hi = LOAD_RANGES[key]
            setattr(t.load, LOAD_KEYS[key], _int(key, value, lo, hi))
    else:
        known = ", ".join([*LOAD_KEYS, *SAMPLING_KEYS])
        raise ValueError(f"--set {key}: unknown setting (known: {known})")
    t.settings_text.append(f"{key}={value}")


def apply_endpoint_option(t: Target, flag: str, value) -> None:
    """--remote-model, --api-key-env, --remote-format or --stall-timeout onto endpoint `t`; the
    key is read from the environment here, so a missing variable is refused before anything runs."""
    if t.kind != "endpoint" or t.endpoint is None:
        raise ValueError(f"{flag} applies to an --endpoint target, not to the model file {t.label}")
    ep = t.endpoint
    if flag == "--remote-model":
        t.remote_model = value
    elif flag == "--remote-format":
        t.prompt_format = value
    elif flag == "--api-key-env":
        t.endpoint = Endpoint.parse(ep.base_url, key_from_env(value), ep.stall_s)
    elif flag == "--stall-timeout":
        t.endpoint = Endpoint.parse(ep.base_url, ep.api_key, value)
    else:
        raise ValueError(f"{flag}: not an endpoint option")


def check_targets(targets: list[Target]) -> None:
    """The targets as a whole, before anything runs: a setting only its neighbours make wrong is
    refused here, in one line, rather than measured as something else or failed in its row."""
    if not MIN_TARGETS <= len(targets) <= MAX_TARGETS:
        raise ValueError(f"compare takes {MIN_TARGETS} to {MAX_TARGETS} targets (--model, --endpoint), "
                         f"got {len(targets)}")
    for t in targets:
        lo = t.load
        if t.kind == "model" and any(s.startswith("ubatch=") for s in t.settings_text) \
                and lo.n_ubatch > lo.n_batch:
            # llama.cpp cuts each batch into ubatches: a larger one would silently run at the batch's size
            raise ValueError(f"--set ubatch={lo.n_ubatch} is more than the batch of {lo.n_batch} tokens of "
                             f"{t.label}: give --set batch={lo.n_ubatch} too, or a smaller ubatch")
