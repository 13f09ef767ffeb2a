"""A thinking template's part in a slot's reply: its switches in the prompt, its split and budget.

The same ReasoningReply the chat window's LocalChatEngine puts on a turn
(app.engine.reasoning), made per slot request that asks for it
(SlotRequest.reasoning), so a server's reply is split and budgeted by the
very rules a chat turn is. A request that does not ask, or a model whose
template names no thinking format, is decoded as plain text, never guessed.
"""

from __future__ import annotations

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.engine.loader import LoadedModel
from app.engine.prompt import PromptFormat, TemplateFormat
from app.engine.reasoning import ReasoningReply
from app.engine.reasoning_budget import vocab_piece
from app.engine.reasoning_formats import OPEN, TemplateThinking
from app.slots.types import SlotRequest

_PROBE = "\u2063opening-probe\u2063"  # a user message no template changes


class SlotThinking:
    def __init__(self, model: LoadedModel, fmt: PromptFormat, vocab):
        self.model, self.vocab = model, vocab
        self.template = fmt.template if isinstance(fmt, TemplateFormat) else ""
        self.thinking = TemplateThinking.read(fmt.template, fmt.bos_token, fmt.eos_token) \
            if isinstance(fmt, TemplateFormat) else None
        self._render = Jinja2ChatFormatter(fmt.template, eos_token=fmt.eos_token, bos_token=fmt.bos_token) \
            if isinstance(fmt, TemplateFormat) and self.thinking is not None else None
        self._openings: dict[tuple, str] = {}

    def _think(self, req: SlotRequest):
        """The request's think setting as ReasoningReply reads it: left to the template's default,
        a constrained reply on a template with a switch does not think, so its format starts at once."""
        s, t = req.settings, self.thinking
        if s.think is None and s.constraint is not None and t is not None and t.switch:
            return False
        return s.think

    def kwargs(self, req: SlotRequest) -> dict:
        """The template kwargs the request's prompt is rendered with: its own, where the template
        reads them at all (a name it never mentions could change nothing), and the switches."""
        if req.reasoning is None:
            return {}
        own = {k: v for k, v in req.template_kwargs.items() if k in self.template}
        if self.thinking is None:
            return own
        return {**own, **self.thinking.kwargs(self._think(req))}

    def reply(self, req: SlotRequest) -> ReasoningReply | None:
        """The request's split and budget (None: its reply is plain text)."""
        if req.reasoning is None or self.thinking is None:
            return None
        llm, s = self.model.llm, req.settings
        return ReasoningReply(self.thinking, self._think(req), s.think_budget, s.constraint is not None,
                              lambda text: llm.tokenize(text.encode("utf-8"), add_bos=False, special=True),
                              vocab_piece(self.vocab), vocab_piece(self.vocab, special=False))

    def opening(self, req: SlotRequest, reply: ReasoningReply) -> str:
        """What a "raw" reply starts with: the reasoning's opening that the generation prompt wrote
        (`<think>\n`), so the text is the whole block a client parses, as llama-server's
        `reasoning_format: none` hands it back; "" where the reply opens its reasoning itself."""
        if req.reasoning != "raw" or reply.state != OPEN or self._render is None:
            return ""
        key = tuple(sorted(reply.kwargs.items()))
        if key not in self._openings:
            try:
                prompt = self._render(messages=[{"role": "user", "content": _PROBE}], **reply.kwargs).prompt
            except Exception:  # noqa: BLE001 - TemplateThinking rendered it already: this cannot happen
                prompt = ""
            tail = prompt[prompt.rfind(_PROBE) + len(_PROBE):] if _PROBE in prompt else ""
            start = tail.rfind(reply.format.start)
            self._openings[key] = tail[start:] if start >= 0 else ""
        return self._openings[key]
