"""A thinking model's reasoning on the wire: read under each name servers give it, asked for in
each server's own words.

Servers agree on the answer's field (`content`) and on little about the thinking before it:
llama-server, LM Studio and DeepSeek stream `reasoning_content`; vLLM (since its rename) and
OpenRouter `reasoning`; OpenRouter also `reasoning_details`, structured, beside the same text. A
client that reads one name loses the others' thinking without a word, and then times the reply
from its answer, as if the model had been silent until then. Asking differs as much: llama-server
and vLLM pass `chat_template_kwargs` to the model's template, each has its own budget field, and
OpenAI-style servers take only `reasoning_effort`. A setting a server cannot take is said, never
sent to be refused or silently misread.
"""

from __future__ import annotations

from app.engine.sampling import GenerationSettings
from app.remote.server import LLAMA_CPP_KINDS, OLLAMA, OPENAI, VLLM

# Read in this order: a server in the middle of a rename (vLLM) or one that sends the text under
# two names (OpenRouter's `reasoning` beside `reasoning_details`) sends the same words twice.
REASONING_FIELDS = ("reasoning_content", "reasoning")
EFFORTS = ("low", "medium", "high")
THINK_CHOICES = ("on", "off", *EFFORTS)


def reasoning_text(part: dict) -> tuple[str, str | None]:
    """(thinking text, None) of a chat delta or a whole reply's message, or ("", why) when a
    field is there but not shaped as any server sends it (every reply is untrusted input)."""
    for name in REASONING_FIELDS:
        value = part.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            return "", f"'{name}' is not text"
        if value:
            return value, None
    return _details(part.get("reasoning_details"))


def _details(details) -> tuple[str, str | None]:
    """OpenRouter's structured form: the text of `reasoning.text` and `reasoning.summary` items;
    an encrypted item carries nothing a reader can show."""
    if details is None:
        return "", None
    if not isinstance(details, list) or not all(isinstance(d, dict) for d in details):
        return "", "'reasoning_details' is not a list of objects"
    out = []
    for d in details:
        key = {"reasoning.text": "text", "reasoning.summary": "summary"}.get(d.get("type"))
        value = d.get(key) if key else None
        if value is not None and not isinstance(value, str):
            return "", f"a reasoning detail's '{key}' is not text"
        out.append(value or "")
    return "".join(out), None


def _switch(think) -> bool | None:
    """The setting as on/off: a level means on; None: not asked, the server's default stands."""
    if think is None:
        return None
    if isinstance(think, bool):
        return think
    return think != "off"


def asked(settings: GenerationSettings) -> tuple[object, int | None]:
    """(think, think_budget) as the settings hold them: read by name, so settings from before
    these fields (or from a build without them) ask for nothing."""
    return getattr(settings, "think", None), getattr(settings, "think_budget", None)


def thinking_fields(kind: str, settings: GenerationSettings) -> dict:
    """The request fields that carry the settings' thinking switch, effort and budget to a server
    of `kind` (what it does not take is left out: `unsent` says it)."""
    think, budget = asked(settings)
    on = _switch(think)
    effort = think if think in EFFORTS else None
    if on is False:
        budget = None  # no thinking: nothing to budget
    body: dict = {}
    llama = kind in LLAMA_CPP_KINDS  # `llamadesk serve` takes llama-server's fields, as it answers
    if llama or kind == VLLM:
        if on is not None:
            body["chat_template_kwargs"] = {"enable_thinking": on}
        if effort:
            body["reasoning_effort"] = effort
        if budget is not None:
            body["reasoning_budget_tokens" if llama else "thinking_token_budget"] = budget
        if body and llama:
            body["reasoning_format"] = "deepseek"  # the thinking apart, whatever the server's default
    elif kind in (OLLAMA, OPENAI):
        if on is False and kind == OLLAMA:
            body["reasoning_effort"] = "none"  # Ollama's /v1 turns thinking off only so
        elif effort:
            body["reasoning_effort"] = effort
    return body


def unsent(kind: str, settings: GenerationSettings) -> list[str]:
    """What of the thinking settings a server of `kind` was not sent, one line each."""
    think, budget = asked(settings)
    sent = thinking_fields(kind, settings)
    out = []
    if think is not None and not ({"chat_template_kwargs", "reasoning_effort"} & sent.keys()):
        out.append(f"thinking {_said(think)} was not sent: a {kind} server takes no thinking switch "
                   "here, so the model thinks as the server decides")
    if budget is not None and _switch(think) is not False \
            and not ({"reasoning_budget_tokens", "thinking_token_budget"} & sent.keys()):
        out.append(f"the thinking budget ({budget} tokens) was not sent: a {kind} server takes none here")
    return out


def _said(think) -> str:
    return ("on" if think else "off") if isinstance(think, bool) else str(think)
