"""One loaded model answering chat turns: the object the window and CLI drive.

It owns the Decoder (and so the KV cache); consecutive turns of the same
conversation therefore prefill only what is new. Not thread-safe: call it
from one thread (the window's engine thread, or the CLI's main thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.chat.budget import fit_history
from app.engine.decoder import CancelToken, Decoder, EventSink
from app.engine.loader import LoadedModel, LoadOptions, load_model
from app.engine.models import Progress, resolve_model
from app.engine.prompt import Msg, chat_format
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats


@dataclass
class Reply:
    text: str
    stats: ReplyStats
    dropped: list[int] = field(default_factory=list)  # history indices left out of context


class ChatEngine:
    def __init__(self, model: LoadedModel):
        self.model = model
        self.decoder = Decoder(model)
        self.format, self.notice = chat_format(model)

    @classmethod
    def open(cls, path: str | Path | None = None, options: LoadOptions | None = None,
             progress: Progress | None = None) -> ChatEngine:
        """Load `path` (or the default model, assembling it on first use)."""
        return cls(load_model(resolve_model(path, progress), options))

    def identity(self) -> dict:
        """What a saved conversation records as "the model": the file a user recognises,
        and the facts that tell two copies or quantizations of a model apart."""
        h = self.model.header
        return {"file": h.path.name, "name": h.name, "architecture": h.architecture,
                "quantization": h.quantization, "parameters": h.parameters or None, "size": h.size}

    @property
    def n_ctx(self) -> int:
        return self.decoder.n_ctx

    def prompt_tokens(self, messages: list[Msg]) -> list[int]:
        text = self.format.render(messages)
        return self.decoder.tokenize(text, add_bos=self.format.add_bos, special=self.format.special)

    def reply(
        self,
        history: list[Msg],
        user_text: str,
        settings: GenerationSettings | None = None,
        system: str | None = None,
        on_event: EventSink | None = None,
        cancel: CancelToken | None = None,
    ) -> Reply:
        """Answer `user_text` after `history` (user/assistant turns, oldest first)."""
        settings = settings or GenerationSettings()
        settings.validate()
        fit = fit_history(system, history, user_text, settings.max_tokens, self.n_ctx,
                          self.prompt_tokens)
        # ignore_eos (benchmarks) means "decode exactly max_tokens": the format's stops go too.
        fmt_stop = () if settings.ignore_eos else self.format.stop
        stop = tuple(dict.fromkeys((*fmt_stop, *settings.stop)))
        run = GenerationSettings(**{**settings.__dict__, "stop": stop})
        done = self.decoder.generate(fit.tokens, run, on_event, cancel)
        done.stats.dropped_messages = len(fit.dropped)
        done.stats.dropped_tokens = fit.dropped_tokens
        return Reply(done.text, done.stats, fit.dropped)

    def close(self) -> None:
        self.decoder.close()
        self.model.close()
