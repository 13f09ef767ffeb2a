"""How a conversation becomes the model's prompt.

A model's own chat template (GGUF `tokenizer.chat_template`) is used when it
has one. Base models such as the bundled Gemma 3 270M have none, and
llama-cpp-python's fallback ("llama-2" format) makes them answer with nothing,
so those get a plain transcript: system preamble, then `User:` / `Assistant:`
turns, stopping when the model starts the next `User:` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

if TYPE_CHECKING:
    from app.engine.loader import LoadedModel

TRANSCRIPT_NOTICE = "no chat template: using plain transcript format"


@dataclass(frozen=True)
class Msg:
    role: str  # "system", "user" or "assistant"
    content: str


class TranscriptFormat:
    name = "plain transcript"
    stop = ("\nUser:",)
    special = False  # user text is never parsed as control tokens
    add_bos = True

    def render(self, messages: list[Msg]) -> str:
        out = []
        for m in messages:
            if m.role == "system":
                out.append(f"{m.content.strip()}\n\n")
            elif m.role == "user":
                out.append(f"User: {m.content.strip()}\n")
            else:
                out.append(f"Assistant: {m.content.strip()}\n")
        out.append("Assistant:")
        return "".join(out)


class TemplateFormat:
    """The model's Jinja chat template, rendered in llama-cpp-python's sandbox."""

    name = "chat template"
    special = True

    def __init__(self, template: str, bos_token: str, eos_token: str):
        self._fmt = Jinja2ChatFormatter(template, eos_token=eos_token, bos_token=bos_token)
        self.stop: tuple[str, ...] = ()
        self.add_bos = True

    def render(self, messages: list[Msg]) -> str:
        res = self._fmt(messages=[{"role": m.role, "content": m.content} for m in messages])
        self.add_bos = not res.added_special
        stop = res.stop if isinstance(res.stop, list) else [res.stop] if res.stop else []
        self.stop = tuple(s for s in stop if s)
        return res.prompt


PromptFormat = TranscriptFormat | TemplateFormat


def chat_format(model: LoadedModel) -> tuple[PromptFormat, str | None]:
    """The model's prompt format and the notice to show once (None for a template).

    The chat and the batch engine both ask here, so a batched chat reads exactly
    like the window's.
    """
    template = model.options.chat_template or model.header.chat_template
    if not template:
        return TranscriptFormat(), TRANSCRIPT_NOTICE
    llm = model.llm
    bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace")
    eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
    return TemplateFormat(template, bos, eos), None
