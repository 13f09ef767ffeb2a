"""A chat answered by a remote OpenAI-compatible server: the remote ReplyEngine (app.chat.engines).

The window, `ask` and the recorder call `reply()` and `identity()` on it as
on the local engine. The server applies its own chat template, so the
history goes as messages, not as a rendered prompt; the server keeps its
own prompt cache (llama-server and vLLM reuse a shared prefix by
themselves), and reports what it reused in `cached_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.chat.reply import PROMPT_FORMATS, Reply
from app.chat.tool_messages import local_turn, needs_writing, read_reply, tools_body, wire_conversation
from app.engine.control import CancelToken, EventSink
from app.engine.message import MessageBody, ToolCall
from app.engine.prompt import TranscriptFormat
from app.engine.sampling import GenerationSettings
from app.openai_compat.tools import ToolCalls
from app.remote import transport as remote_http
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError
from app.remote.reasoning import unsent
from app.remote.server import ServerInfo, probe
from app.remote.stream import chat_body, request_for, stream_reply
from app.remote.tool_deltas import ToolCallDeltas


@dataclass
class RemoteReport:
    """What the model bar and `ask` say about where a remote reply runs."""

    model_path: str  # the server's model id
    kind: str
    host: str
    n_ctx: int | None
    version: str | None = None
    backend: str = "remote"
    fallback: str | None = None

    @property
    def runs_on(self) -> str:
        ctx = f" · ctx {self.n_ctx}" if self.n_ctx else ""
        name = self.model_path.rsplit("/", 1)[-1]  # llama-server names a model by its file's path
        return f"remote {self.kind} at {self.host} · model {name}{ctx}"


class RemoteChatEngine:
    def __init__(self, endpoint: Endpoint, model: str | None = None, notice=None,
                 prompt_format: str = "chat"):
        """Probe the server and pick the model (`model` None: the server's only one).

        `prompt_format` "transcript" renders LlamaDesk's plain transcript and
        sends it to /completions: for a base model without a chat template,
        which a server's chat endpoint would wrap in a template it never saw.
        Raises RemoteError when the server cannot be reached or is not an
        OpenAI server, EndpointConfigError when the model is not there."""
        if prompt_format not in PROMPT_FORMATS:
            raise EndpointConfigError(f"the prompt format must be chat or transcript, not {prompt_format!r}")
        self.endpoint = endpoint
        self.prompt_format = prompt_format
        self.format = TranscriptFormat() if prompt_format == "transcript" else None
        self.http = remote_http.client(endpoint)
        self.on_notice = notice
        self._said: set[str] = set()
        try:
            self.info: ServerInfo = probe(self.http, endpoint)
            self.remote_model = self.info.model(model)
        except BaseException:
            self.http.close()
            raise
        self.notice = ("no chat template in use: LlamaDesk sends its plain transcript to the server's "
                       "/completions" if self.format else None)
        self.report = RemoteReport(self.remote_model.id, self.info.kind, endpoint.host,
                                   self.n_ctx, self.info.version)

    @property
    def n_ctx(self) -> int | None:
        return self.info.n_ctx or self.remote_model.n_ctx

    notes: tuple[str, ...] = ()  # a server's caveats arrive mid-reply, through `notice`
    weights = None  # the server holds the weights: nothing here to share
    limits = None  # this machine's memory says nothing of the server's

    def prepare_constraints(self) -> None:
        """The server keeps the reply to its format: nothing to build here."""

    def reset(self) -> None:
        """A server keeps its own cache; its `cached_tokens` tell what it reused."""

    def identity(self) -> dict:
        """What a saved conversation records as the model: the server's name for it, and
        where it ran; never the API key."""
        label = f"{self.remote_model.id.rsplit('/', 1)[-1]} on {self.info.kind} at {self.endpoint.host}"
        return {"file": label, "name": self.remote_model.id, "architecture": None, "quantization": None,
                "parameters": None, "size": None,
                "remote": {"server": self.info.kind, "base_url": self.endpoint.base_url}}

    def messages(self, history: list[MessageBody], user_text: str | None, system: str | None) -> list[dict]:
        return wire_conversation(history, user_text, system)

    def reply(self, history: list[MessageBody], user_text: str | None,
              settings: GenerationSettings | None = None, system: str | None = None,
              on_event: EventSink | None = None, cancel: CancelToken | None = None,
              tools: ToolCalls | None = None) -> Reply:
        """The chat endpoint takes tool calls and results as OpenAI writes them, and the tools in
        the request; the transcript gets them written out as the local model does, held to the
        tool format by a JSON schema the server enforces."""
        settings = settings or GenerationSettings()
        settings.validate()
        if self.format is not None:
            if needs_writing(history, user_text, tools):
                t = local_turn(history, user_text, system, settings, tools)
                history, user_text, system, settings = t.history, t.user_text, t.system, t.settings
            msgs = [*([MessageBody("system", system)] if system and system.strip() else []), *history,
                    MessageBody("user", user_text or "")]
            path, body = request_for(self.info.kind, self.remote_model.id, msgs, settings, self.format)
            text, stats, thinking = stream_reply(self.http, self.endpoint, self.info, path, body, on_event,
                                                 cancel, self.on_notice)
            return read_reply(Reply(text.strip(), stats, reasoning=thinking), tools)
        body = chat_body(self.info.kind, self.remote_model.id, self.messages(history, user_text, system),
                         settings)
        calls = ToolCallDeltas() if tools is not None else None
        if tools is not None:
            body.update(tools_body(tools))
        self._say_unsent(settings)
        text, stats, thinking = stream_reply(self.http, self.endpoint, self.info, "/chat/completions", body,
                                             on_event, cancel, self.on_notice, calls)
        made = tuple(ToolCall(*c) for c in calls.calls()) if calls is not None else ()
        return Reply(text, stats, tool_calls=made, reasoning=thinking)

    def _say_unsent(self, settings: GenerationSettings) -> None:
        """A thinking setting this server cannot be sent, said once per engine (not per reply: the
        window asks with the same settings all conversation long)."""
        for line in unsent(self.info.kind, settings):
            if line not in self._said and self.on_notice is not None:
                self._said.add(line)
                self.on_notice(line)

    def close(self) -> None:
        self.http.close()
