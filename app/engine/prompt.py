"""How a conversation becomes the model's prompt.

A model's own chat template (GGUF `tokenizer.chat_template`) is used when it
has one. Base models such as the bundled Gemma 3 270M have none, and
llama-cpp-python's fallback ("llama-2" format) makes them answer with nothing,
so those get a plain transcript: a preamble, then `User:` / `Assistant:`
turns, stopping when the model starts any speaker's line.

A base model continues text; it does not know it is meant to answer. Left to
itself it echoes the question, writes the next speaker's turn, or copies an
earlier reply. The default preamble frames the text as a conversation with a
helpful assistant and shows two short exchanges of the shape wanted; a user's
own system prompt replaces the framing sentence, and the examples can be
turned off (then the prompt is the bare transcript).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.engine.message import MessageBody

if TYPE_CHECKING:
    from app.engine.loader import LoadedModel

TRANSCRIPT_NOTICE = "no chat template: using plain transcript format"


DEFAULT_FRAMING = ("The following is a conversation between a user and a helpful, knowledgeable "
                   "assistant. The assistant answers each new message directly, in its own words, "
                   "and does not repeat the question.")
EXAMPLES = (
    ("What is the capital of Japan?", "Tokyo is the capital of Japan."),
    ("Write one sentence about rain.",
     "Soft rain tapped on the window all evening, and the street lamps shone on the wet road."),
)
# Any speaker's line ends the reply: a base model that starts writing the next
# turn (its own "User:", or a "Student:" it made up) has finished its answer.
ROLE_STOPS = tuple(f"\n{role}:" for role in (
    "User", "Assistant", "Student", "Teacher", "Human", "AI", "Question", "Answer", "Q", "A",
    "System", "user", "assistant"))


class TranscriptFormat:
    name = "plain transcript"
    special = False  # user text is never parsed as control tokens
    add_bos = True

    def __init__(self, stop: tuple[str, ...] = ROLE_STOPS):
        self.stop = stop

    @staticmethod
    def preamble_text(system: str | None = None) -> str:
        """What the model reads before the conversation: shown in the settings as it is sent."""
        head = (system or "").strip() or DEFAULT_FRAMING
        shots = "".join(f"User: {q}\nAssistant: {a}\n" for q, a in EXAMPLES)
        return f"{head}\n\n{shots}"

    @staticmethod
    def shown_texts() -> tuple[str, ...]:
        """Everything the preamble shows the model: copying from it is copying."""
        return (DEFAULT_FRAMING, *(t for pair in EXAMPLES for t in pair))

    def render(self, messages: list[MessageBody], preamble: bool = True,
               template_kwargs: dict | None = None) -> str:
        """`template_kwargs` are a chat template's (a transcript has no switches)."""
        system = next((m.content for m in messages if m.role == "system"), None)
        out = [self.preamble_text(system)] if preamble else []
        if system and system.strip() and not preamble:
            out.append(f"{system.strip()}\n\n")
        for m in messages:
            if m.role == "user":
                out.append(f"User: {m.content.strip()}\n")
            elif m.role == "assistant":
                out.append(f"Assistant: {m.content.strip()}\n")
        out.append("Assistant:")
        return "".join(out)


class TemplateFormat:
    """The model's Jinja chat template, rendered in llama-cpp-python's sandbox."""

    name = "chat template"
    special = True

    def __init__(self, template: str, bos_token: str, eos_token: str):
        self.template, self.bos_token, self.eos_token = template, bos_token, eos_token
        self._fmt = Jinja2ChatFormatter(template, eos_token=eos_token, bos_token=bos_token)
        self.stop: tuple[str, ...] = ()
        self.add_bos = True

    def render(self, messages: list[MessageBody], preamble: bool = True,
               template_kwargs: dict | None = None) -> str:
        """The template alone: a model with a chat template needs no preamble.

        `template_kwargs` are the template's own switches for this turn (`enable_thinking`,
        `reasoning_effort`): llama-cpp-python takes them only when a model is loaded. An earlier
        turn's reasoning goes in the fields thinking templates read (`reasoning_content`, and
        gpt-oss's `thinking`), and the template keeps it or drops it as its model was trained to
        see it; other templates never read those fields."""
        # llama-cpp-python types each role's message apart; ours are checked by role already.
        chat: list = [_message(m) for m in messages]
        res = self._fmt(messages=chat, **(template_kwargs or {}))
        self.add_bos = not res.added_special
        stop = res.stop if isinstance(res.stop, list) else [res.stop] if res.stop else []
        self.stop = tuple(s for s in stop if s)
        return res.prompt


def _message(m: MessageBody) -> dict:
    d = {"role": m.role, "content": m.content}
    if m.reasoning:
        d["reasoning_content"] = d["thinking"] = m.reasoning
    return d


PromptFormat = TranscriptFormat | TemplateFormat


def reply_stops(fmt: PromptFormat, own: tuple[str, ...], ignore_eos: bool) -> tuple[str, ...]:
    """The stop strings of one reply: the format's, then the request's own.

    ignore_eos (benchmarks, tests) means "decode exactly max_tokens", so the
    format's stops go too; the chat and the batch engine both ask here.
    """
    return tuple(dict.fromkeys((*(() if ignore_eos else fmt.stop), *own)))


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
