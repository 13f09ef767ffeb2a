"""What kind of server answers, which models it has, and what it tells about itself.

Each server reports different figures (README, "Remote engines"): the probe
finds out which, once per connection, so the reply path knows where to look
and every gauge it cannot feed shows "not reported".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, Fix
from app.remote.transport import get_json, try_json

LLAMA_SERVER, VLLM, OLLAMA, OPENAI = "llama-server", "vLLM", "Ollama", "OpenAI-compatible"
LLAMADESK = "llamadesk serve"
# Servers that take llama.cpp's own samplers (top_k, min_p, repeat_penalty, ignore_eos)
# and report llama-server's `timings` and a slot's context.
LLAMA_CPP_KINDS = (LLAMA_SERVER, LLAMADESK)


@dataclass
class RemoteModel:
    id: str
    n_ctx: int | None = None  # the context a request gets, where the server says


@dataclass
class ServerInfo:
    kind: str
    models: list[RemoteModel]
    version: str | None = None
    n_ctx: int | None = None  # per request (llama-server: one slot's share)
    slots: int | None = None
    chat_template: bool | None = None  # None: the server does not say
    extra: dict = field(default_factory=dict)

    def model(self, name: str | None) -> RemoteModel:
        """The model to use: the named one, or the server's only one."""
        if name is None:
            if len(self.models) == 1:
                return self.models[0]
            if not self.models:
                raise EndpointConfigError("the server lists no models")
            names = ", ".join(m.id for m in self.models[:8])
            raise EndpointConfigError(f"the server has {len(self.models)} models "
                                      f"({names}{', …' if len(self.models) > 8 else ''})",
                                      Fix("pick one with", "model"))
        for m in self.models:
            if m.id == name:
                return m
        # Ollama also answers to "name" for "name:latest".
        for m in self.models:
            if m.id.split(":")[0] == name:
                return m
        names = ", ".join(m.id for m in self.models[:8]) or "none"
        raise EndpointConfigError(f"the server has no model {name!r} (it has: {names})")


MAX_CTX = 2**31 - 1  # positions are 32-bit in llama.cpp and vLLM


def _ctx(v) -> int | None:
    """A context size as reported, or None when it is not one (negative, zero, absurd, a string)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_CTX else None


def _text(v) -> str | None:
    """A version string as reported, or None when the server sent something else."""
    return " ".join(v.split())[:80] if isinstance(v, str) and v.strip() else None


def _owner(body) -> str | None:
    data = body.get("data") if isinstance(body, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return first.get("owned_by")


def _models(body, ep: Endpoint) -> list[RemoteModel]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        from app.remote.errors import RemoteError

        raise RemoteError(ep.base_url, "not an OpenAI-compatible server: /models has no 'data' list")
    out = []
    for m in data:
        if isinstance(m, dict) and isinstance(m.get("id"), str):
            meta: dict = m["meta"] if isinstance(m.get("meta"), dict) else {}
            n_ctx = meta.get("n_ctx") or m.get("max_model_len")  # llama-server / vLLM
            out.append(RemoteModel(m["id"], _ctx(n_ctx)))
    return out


def probe(http: httpx.Client, ep: Endpoint) -> ServerInfo:
    """GET /models (every server has it), then the one extra that names the server."""
    listing = get_json(http, ep, ep.base_url + "/models", "/models")
    models = _models(listing, ep)
    if _owner(listing) == "llamadesk":
        return ServerInfo(LLAMADESK, models, None, models[0].n_ctx if models else None)
    props = try_json(http, ep.root + "/props")
    if isinstance(props, dict) and "default_generation_settings" in props:
        gen = props.get("default_generation_settings") or {}
        n_ctx = gen.get("n_ctx") if isinstance(gen, dict) else None
        return ServerInfo(LLAMA_SERVER, models, _text(props.get("build_info")),
                          _ctx(n_ctx) or (models[0].n_ctx if models else None),
                          _ctx(props.get("total_slots")), bool(props.get("chat_template")),
                          {"slots_endpoint": bool(props.get("endpoint_slots")),
                           "metrics_endpoint": bool(props.get("endpoint_metrics"))})
    ollama = try_json(http, ep.root + "/api/version")
    if isinstance(ollama, dict) and "version" in ollama:
        return ServerInfo(OLLAMA, models, _text(ollama.get("version")))
    vllm = try_json(http, ep.root + "/version")
    if isinstance(vllm, dict) and "version" in vllm:
        n_ctx = models[0].n_ctx if len(models) == 1 else None
        return ServerInfo(VLLM, models, _text(vllm.get("version")), n_ctx)
    return ServerInfo(OPENAI, models)


def slot_usage(http: httpx.Client, ep: Endpoint) -> dict | None:
    """llama-server's /slots: the busiest slot's context and token count (the KV bar)."""
    slots = try_json(http, ep.root + "/slots")
    if not isinstance(slots, list) or not slots:
        return None
    s = max(slots, key=lambda s: s.get("n_prompt_tokens", 0) if isinstance(s, dict) else 0)
    return s if isinstance(s, dict) else None
