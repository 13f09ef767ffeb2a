"""Something that answers a chat turn (ReplyEngine), and the one way every front end opens one.

`ask`, `compare`, the window's engine thread and the benchmarks all chat
through a local model or a remote server; they meet only this Protocol, so a
new kind of engine is added in one place. `open_engine` is the only factory:
it applies the saved API key to every endpoint (a key from the keyring, when
none was given), so no front end can forget it, and it takes every endpoint
option (`remote_model`, `prompt_format`, the stall timeout inside `Endpoint`)
from one record, so the front ends cannot drift apart again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.chat.reply import Reply
from app.engine.control import CancelToken, EventSink
from app.engine.loader import LoadedModel, LoadOptions
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.engine.utilization import Limits
from app.openai_compat.tools import ToolCalls
from app.remote.endpoint import Endpoint


class WhereItRuns(Protocol):
    """What the model bar and `ask` say about where replies are computed (a LoadReport for a
    local model, a RemoteReport for a server)."""

    model_path: str
    backend: str
    fallback: str | None

    @property
    def runs_on(self) -> str: ...


class ReplyEngine(Protocol):
    """Answers chat turns one at a time; not thread-safe: one thread drives it."""

    notice: str | None  # a one-line caveat about the model (no chat template), or None

    @property
    def notes(self) -> Sequence[str]:
        """One-line warnings about this machine's setup (the prompt cache is off, ...)."""
        ...

    @property
    def report(self) -> WhereItRuns: ...

    @property
    def n_ctx(self) -> int | None: ...  # None: a server that does not tell

    @property
    def weights(self) -> LoadedModel | None:
        """The loaded weights another context may share (a batch, the server); None for a server."""
        ...

    @property
    def limits(self) -> Limits | None:
        """The machine's bandwidth and arithmetic limits for this model (the utilization gauge)."""
        ...

    def identity(self) -> dict:
        """What a saved conversation records as the model (never an API key)."""
        ...

    def reply(self, history: list[MessageBody], user_text: str | None,
              settings: GenerationSettings | None = None, system: str | None = None,
              on_event: EventSink | None = None, cancel: CancelToken | None = None,
              tools: ToolCalls | None = None) -> Reply:
        """`user_text` None continues after the history's last message (a tool's result); with
        `tools` the reply may be calls (Reply.tool_calls) instead of text."""
        ...

    def prepare_constraints(self) -> None:
        """Build now what a reply kept to a format or tools needs first (a local model's
        vocabulary index), so the first such reply does not wait for it."""
        ...

    def reset(self) -> None:
        """Forget what is kept between turns (a local KV cache); a server keeps its own."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EngineTarget:
    """What to open: a model file (`path` None: the bundled default) or an endpoint."""

    path: str | None = None
    options: LoadOptions = field(default_factory=LoadOptions)
    prompt_cache: bool = True  # a local model's saved prefixes on disk (compare turns it off)
    endpoint: Endpoint | None = None  # a server instead of a file; its key, if any, inside
    remote_model: str | None = None  # the server's model id (None: its only one)
    prompt_format: str = "chat"  # "transcript": LlamaDesk's plain transcript to /completions
    draft_model: str | None = None  # a local model's draft (speculative="draft"), same vocabulary

    @property
    def remote(self) -> bool:
        return self.endpoint is not None


def open_engine(target: EngineTarget, progress: Callable[[int, int], None] | None = None,
                notice: Callable[[str], None] | None = None) -> ReplyEngine:
    """Open `target`. `progress` sees the default model's first assembly; `notice` a server's
    mid-reply warnings. Can block (a load, an HTTP probe, a keyring): call it off the GUI thread."""
    if target.endpoint is not None:
        from app.chat.remote_engine import RemoteChatEngine  # the HTTP stack only when it is used
        from app.remote.keys import with_saved_key

        return RemoteChatEngine(with_saved_key(target.endpoint), target.remote_model, notice=notice,
                                prompt_format=target.prompt_format)
    from app.chat.local_engine import LocalChatEngine

    engine = LocalChatEngine.open(target.path, target.options, progress=progress,
                                  prompt_cache=target.prompt_cache)
    if target.draft_model is not None:
        try:
            engine.load_draft(target.draft_model)
        except BaseException:
            engine.close()
            raise
    return engine
