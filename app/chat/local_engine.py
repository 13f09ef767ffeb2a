"""One loaded model answering chat turns: the local ReplyEngine (app.chat.engines).

It owns the Decoder (and so the KV cache); consecutive turns of the same
conversation therefore prefill only what is new. What every chat with the
same system prompt starts with (the preamble, a long system prompt) is also
kept in the prompt cache on disk, so a new chat or a new process need not
evaluate it again. Not thread-safe: call it from one thread (the window's
engine thread, or the CLI's main thread).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.chat.budget import fit_history
from app.chat.reply import Reply
from app.chat.tool_messages import local_turn, needs_writing, read_reply
from app.engine import vocabulary
from app.engine.control import CancelToken, EventSink, common_prefix
from app.engine.decoder import Decoder
from app.engine.loader import LoadedModel, LoadOptions, load_model
from app.engine.message import MessageBody
from app.engine.models import Progress, resolve_model
from app.engine.prompt import TemplateFormat, chat_format, reply_stops
from app.engine.prompt_cache import MIN_PREFIX_TOKENS, PromptCache
from app.engine.reasoning import ReasoningReply
from app.engine.reasoning_budget import vocab_piece
from app.engine.reasoning_formats import TemplateThinking
from app.engine.sampling import GenerationSettings
from app.engine.utilization import limits_for
from app.openai_compat.tools import ToolCalls

# Two first messages that share no first character: what their prompts share is the chat's own.
_PROBES = ("a", "b")


class LocalChatEngine:
    def __init__(self, model: LoadedModel, prompt_cache: bool = True):
        """`prompt_cache` False: never read or write saved prefixes on disk."""
        self.model = model
        self.notes: list[str] = []
        cache = PromptCache(model) if prompt_cache else None
        why = cache.unusable() if cache is not None else None
        if why is not None:
            self.notes.append(f"the prompt cache is off: {why}")
            cache = None
        self.decoder = Decoder(model, cache)
        self.format, self.notice = chat_format(model)
        fmt = self.format
        # A thinking template's format and switches (None: replies are plain text).
        self.thinking = TemplateThinking.read(fmt.template, fmt.bos_token, fmt.eos_token) \
            if isinstance(fmt, TemplateFormat) else None
        self.limits = limits_for(model)  # None on a GPU: the probe reads the CPU's memory
        self._prefixes: dict[tuple, list[int] | None] = {}

    @classmethod
    def open(cls, path: str | Path | None = None, options: LoadOptions | None = None,
             progress: Progress | None = None, prompt_cache: bool = True) -> LocalChatEngine:
        """Load `path` (or the default model, assembling it on first use)."""
        return cls(load_model(resolve_model(path, progress), options), prompt_cache)

    def load_draft(self, path: str | Path | None) -> None:
        """The draft model speculative="draft" guesses with, loaded as the model was (its context as
        long); None unloads it. One whose vocabulary differs is refused, saying how."""
        if path is None:
            self.decoder.attach_draft(None)
            return
        opts = replace(self.model.options, n_ctx=self.n_ctx)
        self.decoder.attach_draft(load_model(resolve_model(path), opts))

    def identity(self) -> dict:
        """What a saved conversation records as "the model": the file a user recognises,
        and the facts that tell two copies or quantizations of a model apart."""
        h = self.model.header
        return {"file": h.path.name, "name": h.name, "architecture": h.architecture,
                "quantization": h.quantization, "parameters": h.parameters or None, "size": h.size}

    @property
    def report(self):
        """Where the model runs (LoadReport): what `ask` and the model bar print."""
        return self.model.report

    @property
    def n_ctx(self) -> int:
        return self.decoder.n_ctx

    @property
    def weights(self) -> LoadedModel:
        return self.model

    def prepare_constraints(self) -> None:
        """Index the vocabulary for constrained replies now, off the reply's clock."""
        vocabulary.prepare(self.decoder.vocab, self.decoder.n_vocab)

    def reset(self) -> None:
        """An empty KV cache: the next reply prefills its whole prompt (compare's fresh runs)."""
        self.decoder.reset()

    def prompt_tokens(self, messages: list[MessageBody], preamble: bool = True,
                      template_kwargs: dict | None = None) -> list[int]:
        text = self.format.render(messages, preamble, template_kwargs)
        return self.decoder.tokenize(text, add_bos=self.format.add_bos, special=self.format.special)

    def reasoning_reply(self, settings: GenerationSettings) -> ReasoningReply | None:
        """A thinking template's split, switches and budget for one reply (None: plain text)."""
        if self.thinking is None:
            return None
        d = self.decoder
        return ReasoningReply(self.thinking, settings.think, settings.think_budget,
                              settings.constraint is not None,
                              lambda text: d.tokenize(text, add_bos=False, special=True),
                              vocab_piece(d.vocab), vocab_piece(d.vocab, special=False))

    def shared_prefix(self, system: str | None, preamble: bool = True,
                      template_kwargs: dict | None = None) -> list[int] | None:
        """The tokens every chat with this system prompt starts with, or None when too short to save.

        Taken as the common start of two first messages' whole prompts rather
        than by tokenizing the text before the message: a tokenizer may merge
        across that boundary, and a chat template may put the system prompt
        anywhere. A prompt that does not start with these tokens just misses.
        """
        kw = template_kwargs or {}
        key = (system if system and system.strip() else None, preamble, tuple(sorted(kw.items())))
        if key not in self._prefixes:
            head = [MessageBody("system", key[0])] if key[0] else []
            a, b = (self.prompt_tokens([*head, MessageBody("user", p)], preamble, kw) for p in _PROBES)
            n = common_prefix(a, b)
            self._prefixes = dict(list(self._prefixes.items())[-7:])  # a few system prompts at most
            self._prefixes[key] = a[:n] if n >= MIN_PREFIX_TOKENS else None
        return self._prefixes[key]

    def reply(
        self,
        history: list[MessageBody],
        user_text: str | None,
        settings: GenerationSettings | None = None,
        system: str | None = None,
        on_event: EventSink | None = None,
        cancel: CancelToken | None = None,
        tools: ToolCalls | None = None,
    ) -> Reply:
        """Answer `user_text` after `history` (oldest first; None: continue after the history's
        last message, a tool's result). With `tools` the reply may call them: described in the
        system prompt and held by the grammar to the tool format, as LlamaDesk's server does.

        `settings.preamble` False sends the bare transcript (a template model has none anyway)."""
        settings = settings or GenerationSettings()
        settings.validate()
        if needs_writing(history, user_text, tools):
            turn = local_turn(history, user_text, system, settings, tools)
            history, user_text, system, settings = turn.history, turn.user_text, turn.system, turn.settings
        assert user_text is not None
        preamble = settings.preamble
        thinking = self.reasoning_reply(settings)
        kw = thinking.kwargs if thinking is not None else {}
        # Before the fit: a template format keeps its stop strings from the last render.
        shared = self.shared_prefix(system, preamble, kw) if self.decoder.prompt_cache else None
        fit = fit_history(system, history, user_text, settings.max_tokens, self.n_ctx,
                          lambda msgs: self.prompt_tokens(msgs, preamble, kw))
        stop = reply_stops(self.format, tuple(settings.stop), settings.ignore_eos)
        run = GenerationSettings(**{**settings.__dict__, "stop": stop,
                                    "reasoning": thinking.tracker if thinking is not None else None})
        sink = thinking.sink(on_event) if thinking is not None else on_event
        done = self.decoder.generate(fit.tokens, run, sink, cancel, shared_prefix=shared)
        done.stats.dropped_messages = len(fit.dropped)
        done.stats.dropped_tokens = fit.dropped_tokens
        done.stats.reply_limit = fit.limit(settings.max_tokens)  # the decoder clamps it the same way
        if self.limits is not None and done.stats.kv_used:
            done.stats.bw_utilization = self.limits.at(done.stats.kv_used, done.stats.decode_tok_s)[1]
        if thinking is None:
            return read_reply(Reply(done.text, done.stats, fit.dropped), tools)
        return read_reply(Reply(thinking.answer, done.stats, fit.dropped, reasoning=thinking.reasoning),
                          tools)

    def close(self) -> None:
        self.decoder.close()
        self.model.close()
