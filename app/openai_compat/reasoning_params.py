"""A chat request's thinking fields, as llama-server reads them, checked like every other field.

llama-server's own names are taken, so a client written for it needs no
change: `reasoning_format` (how the reply is handed back: split, or all of
it in `content`), `chat_template_kwargs` (the template's switches, e.g.
`{"enable_thinking": false}`), OpenAI's `reasoning_effort`, and
`reasoning_budget_tokens` (llama-server also reads `thinking_budget_tokens`).
The switches become GenerationSettings.think, the budget think_budget, so
the engine applies them as it does for the chat window; what the model's
template makes of them is decided where the model is known (app.slots).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.engine.sampling import INT32_MAX, THINK_LEVELS
from app.openai_compat.fields import is_text, show, whole
from app.openai_compat.refusal import bad

FIELDS = {"reasoning_format", "chat_template_kwargs", "reasoning_budget_tokens", "thinking_budget_tokens"}
# "deepseek-legacy" (the reasoning kept in `content` while streaming) is llama-server's too, but not
# honoured here: refused rather than answered in the other shape.
FORMATS = ("none", "auto", "deepseek")
# OpenAI's levels; "minimal" has no template of its own and reads as the lowest one.
EFFORTS = ("none", "minimal", *THINK_LEVELS)
# The template's own switches: given as kwargs they are read as the request's think setting.
SWITCHES = ("enable_thinking", "reasoning_effort")
MAX_KWARGS_BYTES = 64 * 1024


@dataclass(frozen=True)
class ReasoningAsk:
    """What a request asked of a thinking model, beyond the settings: `split` None is the
    server's --reasoning-format; `kwargs` the template kwargs that are not switches."""

    split: bool | None = None
    kwargs: dict = field(default_factory=dict)
    think_param: str | None = None  # the field that set the think setting, for a refusal


def _format(body: dict) -> bool | None:
    v = body.get("reasoning_format")
    if v is None:
        return None
    if v not in FORMATS:
        raise bad("reasoning_format", f"reasoning_format must be one of {', '.join(FORMATS)}, got {show(v)}")
    return v != "none"


def _effort(v, param: str) -> bool | str:
    if v not in EFFORTS:
        raise bad(param, f"{param} must be one of {', '.join(EFFORTS)}, got {show(v)}")
    return False if v == "none" else "low" if v == "minimal" else v


def _kwargs(body: dict) -> tuple[dict, bool | str | None]:
    """The template kwargs apart from the switches, and the switch they set (None: none)."""
    raw = body.get("chat_template_kwargs")
    if raw is None:
        return {}, None
    if not isinstance(raw, dict):
        raise bad("chat_template_kwargs", f"chat_template_kwargs must be an object, got {show(raw)}")
    if not all(isinstance(k, str) and k.isidentifier() for k in raw):
        raise bad("chat_template_kwargs", "chat_template_kwargs keys must be names a template can read")
    if len(json.dumps(raw, ensure_ascii=False)) > MAX_KWARGS_BYTES or not is_text(json.dumps(raw)):
        raise bad("chat_template_kwargs", f"chat_template_kwargs must be valid text under "
                                          f"{MAX_KWARGS_BYTES} bytes")
    think: bool | str | None = None
    if "enable_thinking" in raw:
        v = raw["enable_thinking"]
        if not isinstance(v, bool):
            raise bad("chat_template_kwargs", f'chat_template_kwargs.enable_thinking must be true or '
                                              f"false, got {show(v)}")
        think = v
    if "reasoning_effort" in raw:
        level = _effort(raw["reasoning_effort"], "chat_template_kwargs")
        think = level if think is not False else False
    return {k: v for k, v in raw.items() if k not in SWITCHES}, think


def _budget(body: dict) -> int | None:
    """-1 (or absent): the server's budget; None in the result means exactly that."""
    key = next((k for k in ("reasoning_budget_tokens", "thinking_budget_tokens") if body.get(k) is not None),
               None)
    if key is None:
        return None
    try:
        v = whole(key, body[key])
    except ValueError as e:
        raise bad(key, str(e)) from None
    if not -1 <= v <= INT32_MAX:
        raise bad(key, f"{key} must be -1 (no limit of its own) or from 0 to {INT32_MAX}, got {v}")
    return None if v == -1 else v


def reasoning_of(body: dict, think, budget: int | None) -> tuple[ReasoningAsk, bool | str | None, int | None]:
    """The request's ask, its think setting and its budget (`think` and `budget`: the server's)."""
    split = _format(body)
    kwargs, switched = _kwargs(body)
    param = None
    if switched is not None:
        think, param = switched, "chat_template_kwargs"
    if body.get("reasoning_effort") is not None:
        think, param = _effort(body["reasoning_effort"], "reasoning_effort"), "reasoning_effort"
    asked = _budget(body)
    return ReasoningAsk(split, kwargs, param), think, budget if asked is None else asked
