"""What the server makes of a chat request's thinking fields, knowing its model's template.

The fields are read model-blind (app.openai_compat.reasoning_params); here
the template decides. A template with a thinking format gets every reply
split (or kept whole, for `reasoning_format: none`) by the slots' own
ReasoningReply. A template without one answers plain text, never guessed:
the fields that cannot change that (a format, a budget, thinking turned
off) are accepted, and asking such a model to think is refused, since an
answer without reasoning would look like one that had some.
"""

from __future__ import annotations

from dataclasses import replace

from app.engine.loader import LoadedModel
from app.engine.prompt import TemplateFormat, chat_format
from app.engine.reasoning_formats import detect
from app.engine.sampling import GenerationSettings
from app.openai_compat.params import Parsed
from app.openai_compat.reasoning_params import ReasoningAsk
from app.serve.http_rules import bad
from app.slots.types import SlotRequest


class ServedThinking:
    def __init__(self, model: LoadedModel, split: bool):
        """`split`: the server's --reasoning-format is not "none"."""
        fmt, _ = chat_format(model)
        self.format = detect(fmt.template) if isinstance(fmt, TemplateFormat) else None
        self.split = split

    def request_fields(self, p: Parsed) -> dict:
        return self.fields(p.settings, p.reasoning)

    def batch(self, req: SlotRequest) -> SlotRequest:
        """A Batch API line's request, split and switched as the same request online is. The line's
        own reasoning_format and extra template kwargs do not reach here (app.batch_jsonl reads the
        line), so the server's format applies; its think, effort and budget do."""
        if self.format is None:
            return req  # plain text; an ask to think was checked by no one who could refuse it
        return replace(req, **self.fields(req.settings, ReasoningAsk()))

    def fields(self, settings: GenerationSettings, ask: ReasoningAsk) -> dict:
        """A chat request's SlotRequest fields (settings, reasoning, template_kwargs); raises
        ApiError when it asks a model that cannot think to think.

        Left unsaid, a thinking template thinks, as llama-server has it (its enable_thinking is
        true unless turned off), even one whose own default is off; a constrained reply is the
        exception, its format starting at once (app.engine.reasoning)."""
        think = settings.think
        if self.format is not None and think is None and settings.constraint is None:
            settings = replace(settings, think=True)
        if self.format is None and think not in (None, False):
            raise bad(ask.think_param or "reasoning_effort",
                      "this model's chat template has no thinking format: it answers without "
                      "reasoning (leave the field out, or serve a thinking model)")
        split = self.split if ask.split is None else ask.split
        return {"settings": settings, "reasoning": "split" if split else "raw",
                "template_kwargs": dict(ask.kwargs)}
