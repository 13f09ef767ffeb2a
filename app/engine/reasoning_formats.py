"""Which thinking format a chat template speaks, read from the template's own text.

A thinking model writes its reasoning between markers its chat template
names, and the template alone says which: `<think>…</think>` (Qwen3, QwQ,
DeepSeek-R1 distills, SmolLM3), `[THINK]…[/THINK]` (Ministral Reasoning),
gpt-oss's harmony channels, Gemma 4's thought channel. A template naming none
of them gets no format and its replies stay plain text: guessing would cut a
plain model's answer wherever it happened to write "<think>".

Whether a reply starts inside its reasoning is a property of the rendered
generation prompt, not of the model's name: Qwen3.5 and R1 distills open
`<think>` themselves (so the reply never shows the opening tag), Qwen3 leaves
it to the model, and a switched-off template closes an empty block. So the
template is rendered with the switch on and off, as llama-cpp-python's
formatter renders it, and the tail after the user's message is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

EFFORTS = ("low", "medium", "high")
_PROBE = "\u2063reasoning-probe\u2063"  # a user message no template changes


@dataclass(frozen=True)
class ReasoningFormat:
    """The markers of one thinking format, as text (a marker may be one control token)."""

    name: str
    start: str  # opens the reasoning
    end: str  # closes it
    # Harmony opens every message with a channel header (`<|channel|>final<|message|>`): a header
    # is neither reasoning nor answer, and after `end` the answer waits for the next one. "": the
    # answer follows `end` directly.
    header: str = ""
    header_end: str = ""
    # What a template must contain, beyond the markers, to be read as this format.
    needs: tuple[str, ...] = field(default=())

    def recognises(self, template: str) -> bool:
        return all(s in template for s in (self.start, self.end, *self.needs))


FORMATS = (
    ReasoningFormat("harmony", "<|channel|>analysis<|message|>", "<|end|>", "<|channel|>",
                    "<|message|>", ("<|channel|>final",)),
    ReasoningFormat("gemma4", "<|channel>thought", "<channel|>"),
    ReasoningFormat("think-brackets", "[THINK]", "[/THINK]"),
    ReasoningFormat("think-tags", "<think>", "</think>"),
)


def detect(template: str | None) -> ReasoningFormat | None:
    """The thinking format `template` names, or None (plain text, never guessed)."""
    if not template:
        return None
    return next((f for f in FORMATS if f.recognises(template)), None)


# How a rendered generation prompt leaves the reply: inside its reasoning, after an empty closed
# block (thinking off), or free to open one itself.
OPEN, CLOSED, FREE = "open", "closed", "free"


class TemplateThinking:
    """A thinking template's controls: its format, its on/off switch, its effort levels, and
    how each setting leaves the generation prompt (rendered once per setting, then kept)."""

    def __init__(self, template: str, fmt: ReasoningFormat, bos: str = "", eos: str = ""):
        self.format = fmt
        self._fmt = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos)
        self._states: dict[tuple, str] = {}
        self.efforts = EFFORTS if "reasoning_effort" in template else ()
        self.switch = "enable_thinking" in template and \
            self.state({"enable_thinking": True}) != self.state({"enable_thinking": False})

    @classmethod
    def read(cls, template: str | None, bos: str = "", eos: str = "") -> TemplateThinking | None:
        fmt = detect(template)
        return None if fmt is None or template is None else cls(template, fmt, bos, eos)

    def kwargs(self, think) -> dict:
        """What the template is rendered with for `think` (None: the template's default; True,
        False; or an effort level). A level on a template without levels means "on", and a
        switch the template lacks is not invented: it then thinks as it always does."""
        if think is None:
            return {}
        if isinstance(think, str):
            if self.efforts:
                return {"reasoning_effort": think}
            think = True
        return {"enable_thinking": bool(think)} if self.switch else {}

    def state(self, kwargs: dict) -> str:
        """OPEN, CLOSED or FREE: where the generation prompt rendered with `kwargs` leaves the reply."""
        key = tuple(sorted(kwargs.items()))
        if key not in self._states:
            try:
                prompt = self._fmt(messages=[{"role": "user", "content": _PROBE}], **kwargs).prompt
            except Exception:  # noqa: BLE001 - a template that cannot render a bare turn opens nothing
                prompt = ""
            tail = prompt[prompt.rfind(_PROBE) + len(_PROBE):] if _PROBE in prompt else ""
            self._states[key] = tail_state(tail, self.format)
        return self._states[key]

    def default_on(self) -> bool:
        """Whether the template thinks unless told otherwise (its default prompt does not close
        the reasoning): what the window's switch shows before the user touches it."""
        return self.state({}) != CLOSED


def tail_state(tail: str, fmt: ReasoningFormat) -> str:
    """Where a generation prompt's tail leaves the reply (OPEN, CLOSED or FREE)."""
    s = tail.rfind(fmt.start)
    if s < 0:
        return FREE
    return CLOSED if tail.find(fmt.end, s + len(fmt.start)) >= 0 else OPEN
