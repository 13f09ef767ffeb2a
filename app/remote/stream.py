"""One streamed completion (chat or plain prompt): engine events while it arrives, one ReplyStats at the end.

Client-side figures are always measured here: TTFT from the request to the
first content delta, the rate at which deltas arrived, the total. The
server's own figures (llama-server's `timings`, any server's `usage`) go
beside them, so network and queueing time show apart from compute. A cut,
stalled or malformed stream ends the reply with what was shown kept and the
failure in `stats.error`, exactly as a local decode error does.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time

import httpx
from httpx_sse import EventSource, SSEError

from app.engine.control import EventSink
from app.engine.events import Finished, FirstToken, TextDelta
from app.engine.grammar import Constraint
from app.engine.prompt import TranscriptFormat, reply_stops
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, RemoteError
from app.remote.server import LLAMA_CPP_KINDS, VLLM, ServerInfo
from app.remote.tool_deltas import ToolCallDeltas
from app.remote.transport import MALFORMED, Notice, open_stream, parse_data, transport_reason

_SURROGATE = re.compile("[\ud800-\udfff]")
_FINISH = {"stop": "stop", "length": "length", "eos": "stop", "tool_calls": "stop", "content_filter": "stop"}


def _sampling(kind: str, s: GenerationSettings, stop: tuple[str, ...]) -> dict:
    """The OpenAI fields every server takes, plus the samplers the server is known to accept
    (OpenAI itself refuses unknown fields, so nothing extra goes to an unknown server)."""
    body: dict = {"stream": True, "stream_options": {"include_usage": True},
                  "max_tokens": s.max_tokens, "temperature": s.temperature, "top_p": s.top_p}
    if s.seed is not None:
        body["seed"] = s.seed
    if stop:
        body["stop"] = list(stop)
    if kind in (*LLAMA_CPP_KINDS, VLLM):
        body.update(top_k=s.top_k, min_p=s.min_p)
        body["repeat_penalty" if kind in LLAMA_CPP_KINDS else "repetition_penalty"] = s.repeat_penalty
        if s.ignore_eos:
            body["ignore_eos"] = True
    body.update(_constraint(kind, s.constraint))
    return body


def _constraint(kind: str, c: Constraint | None) -> dict:
    """The reply's constraint as the server takes it: a JSON schema as OpenAI's response_format
    (every OpenAI-compatible server here reads it), a GBNF grammar as llama.cpp's `grammar`. One the
    server cannot take is refused, never sent off to be answered unconstrained."""
    if c is None:
        return {}
    if c.kind in ("json_schema", "json_object"):
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "reply", "schema": json.loads(c.source), "strict": True}}}
    if c.kind == "gbnf" and kind in LLAMA_CPP_KINDS:
        return {"grammar": c.source}
    raise EndpointConfigError(f"a {kind} server cannot be held to a {c.kind} constraint here; "
                              "give a JSON schema instead")


def chat_body(kind: str, model: str, messages: list[dict], s: GenerationSettings) -> dict:
    """For /chat/completions: the server applies the model's chat template."""
    return {"model": model, "messages": messages, **_sampling(kind, s, tuple(s.stop)[:4])}


def completion_body(kind: str, model: str, prompt: str, s: GenerationSettings,
                    stop: tuple[str, ...]) -> dict:
    """For /completions: a prompt LlamaDesk rendered (the plain transcript of a base model)."""
    return {"model": model, "prompt": prompt, **_sampling(kind, s, stop)}


def request_for(kind: str, model: str, messages: list, s: GenerationSettings,
                transcript: TranscriptFormat | None) -> tuple[str, dict]:
    """(path, body) for `messages` (MessageBody): the chat endpoint, or with `transcript` the plain
    transcript LlamaDesk renders itself, sent to /completions with the format's stop strings."""
    if transcript is None:
        return "/chat/completions", chat_body(kind, model, [{"role": m.role, "content": m.content}
                                                            for m in messages], s)
    stop = reply_stops(transcript, tuple(s.stop), s.ignore_eos)
    return "/completions", completion_body(kind, model, transcript.render(messages, s.preamble), s, stop)


def _choices(chunk: dict, ep: Endpoint) -> list[dict]:
    """The chunk's choices, checked: every reply from a server is untrusted input."""
    choices = chunk.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise RemoteError(ep.base_url, f"{MALFORMED} ('choices' is {_kind(choices)}, not a list of objects)")
    return choices


def _piece(choice: dict, ep: Endpoint) -> str:
    """A chat delta's content, or a completion chunk's text."""
    delta = choice.get("delta")
    if delta is not None and not isinstance(delta, dict):
        raise RemoteError(ep.base_url, f"{MALFORMED} (a choice's 'delta' is {_kind(delta)})")
    where, value = ("content", delta.get("content")) if delta is not None else ("text", choice.get("text"))
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RemoteError(ep.base_url, f"{MALFORMED} ('{where}' is {_kind(value)}, not text)")
    return value


def _kind(v) -> str:
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(v), "null" if v is None else type(v).__name__)


class _Text:
    """The reply's text as shown and as saved, which must be the same: JSON can carry a lone
    UTF-16 surrogate that no UTF-8 file can store, so one is shown as U+FFFD (and said once);
    a pair a server split across two events is joined again."""

    def __init__(self, notice: Notice | None):
        self.parts: list[str] = []
        self._held = ""
        self._notice = notice
        self.replaced = False

    def clean(self, piece: str) -> str:
        piece = self._held + piece
        self._held = ""
        if piece and "\ud800" <= piece[-1] <= "\udbff":  # a high half: its low half may come next
            piece, self._held = piece[:-1], piece[-1]
        if not _SURROGATE.search(piece):
            return piece
        joined = piece.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # lone halves: U+FFFD
        if joined.count("\ufffd") > piece.count("\ufffd"):
            self._said()
        return joined

    def tail(self) -> str:
        if self._held:
            self._held = ""
            self._said()
            return "\ufffd"
        return ""

    def _said(self) -> None:
        if not self.replaced:
            self.replaced = True
            if self._notice is not None:
                self._notice("the server sent text that is not valid Unicode: shown and kept with "
                             "\ufffd in its place")


class _Stopper:
    """Ends the response when the user cancels, so a Stop takes effect at once even while the
    server sends nothing (and the server stops that slot).

    Closing the response from this thread is not enough: the reading thread stays blocked in
    the socket's recv until the server's next byte (a slow drip's next token, or a long
    prefill), so the socket is shut down, which ends that recv at once; the reading thread
    then sees the stream end and closes the response itself."""

    def __init__(self, resp: httpx.Response | None, cancel) -> None:
        self.done = threading.Event()
        self.fired = False
        self._resp, self._cancel = resp, cancel
        if cancel is not None and resp is not None:
            threading.Thread(target=self._watch, name="llamadesk-remote-stop", daemon=True).start()

    def _watch(self) -> None:
        resp = self._resp
        while resp is not None and not self.done.wait(0.05):
            if self._cancel.is_set():
                self.fired = True
                if not _shut_down(resp):
                    resp.close()
                return


def _shut_down(resp: httpx.Response) -> bool:
    """Shut the response's socket down in both directions; False when it cannot be reached."""
    stream = resp.extensions.get("network_stream")
    try:
        sock = stream.get_extra_info("socket") if stream is not None else None
    except Exception:  # noqa: BLE001 - a transport without sockets: the close above is the fallback
        sock = None
    if not isinstance(sock, socket.socket):
        return False
    try:
        # socket.socket's own shutdown: an SSLSocket's would drop its TLS state under the reader
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed by the server or the reader: nothing left to wake
        pass
    return True


def stream_reply(http: httpx.Client, ep: Endpoint, info: ServerInfo, path: str, body: dict,
                 on_event: EventSink | None = None, cancel=None,
                 notice: Notice | None = None, calls: ToolCallDeltas | None = None) -> tuple[str, ReplyStats]:
    """POST `body` to `path` (/chat/completions or /completions) and follow its stream; `calls`
    collects the reply's streamed tool calls (a request that gave the server tools)."""
    emit = on_event or (lambda ev: None)
    t0 = time.perf_counter()
    shown = _Text(notice)
    text = shown.parts
    n_deltas = 0
    t_first = t_last = t_finish = None
    usage = timings = None
    finish = None
    error = None
    with open_stream(http, ep, path, body, notice, cancel) as resp:  # None: stopped before it began
        stopper = _Stopper(resp, cancel)
        try:
            for sse in EventSource(resp).iter_sse() if resp is not None else ():
                if cancel is not None and cancel.is_set():
                    break
                if sse.data.strip() == "[DONE]":
                    break
                if not sse.data.strip():
                    continue
                chunk = parse_data(sse.data, ep)
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings
                for choice in _choices(chunk, ep):
                    piece = shown.clean(_piece(choice, ep))
                    bad = calls.feed(choice.get("delta")) if calls is not None else None
                    if bad is not None:
                        raise RemoteError(ep.base_url, f"{MALFORMED} ({bad})")
                    if calls is not None and t_first is None and calls.calls():
                        t_first = time.perf_counter()  # a reply of calls alone has its first token here
                        emit(FirstToken(t_first - t0))
                    if piece:
                        now = time.perf_counter()
                        if t_first is None:
                            t_first = now
                            emit(FirstToken(now - t0))
                        t_last = now
                        n_deltas += 1
                        text.append(piece)
                        emit(TextDelta(piece, n_deltas, now))
                    if choice.get("finish_reason") and t_finish is None:
                        t_finish = time.perf_counter()
                    finish = choice.get("finish_reason") or finish
            else:
                if finish is None:
                    error = "the stream ended before the reply finished"
        except RemoteError as e:
            error = e.reason
        except (httpx.TransportError, httpx.DecodingError, httpx.StreamError, SSEError) as e:
            if not stopper.fired:
                error = (transport_reason(e, ep) if isinstance(e, (httpx.TransportError, httpx.DecodingError))
                         else f"malformed stream ({ep.scrub(str(e))})")
        finally:
            stopper.done.set()
    tail = shown.tail()
    if tail:
        text.append(tail)
        emit(TextDelta(tail, n_deltas, time.perf_counter()))
    cancelled = cancel is not None and cancel.is_set()
    if cancelled:
        stop_reason = "cancelled"
        error = None
    elif error is not None:
        stop_reason = "error"
    else:
        stop_reason = _FINISH.get(finish or "stop", "stop")
    # The rate runs to the finish, not to the last text: a server holds back text that might
    # begin a stop string, and the tokens it then drops were generated all the same.
    stats = _stats(info, ep, t0, t_first, t_finish or t_last, n_deltas, usage, timings, stop_reason, notice)
    stats.error = error
    full = "".join(text)
    emit(Finished(full, stats))
    return full, stats


def _stats(info: ServerInfo, ep: Endpoint, t0: float, t_first, t_last, n_deltas: int,
           usage: dict | None, timings: dict | None, stop_reason: str,
           notice: Notice | None = None) -> ReplyStats:
    end = time.perf_counter()
    figures = _Figures(notice)
    usage = figures.table("usage", usage)
    tm = figures.table("timings", timings)
    details = figures.table("prompt_tokens_details", usage.get("prompt_tokens_details"))
    prompt = figures.count("prompt_tokens", usage.get("prompt_tokens"))
    completion = figures.count("completion_tokens", usage.get("completion_tokens"))
    cached = figures.count("cached_tokens", details.get("cached_tokens"))
    if cached is None:
        cached = figures.count("cache_n", tm.get("cache_n"))
    if prompt is not None and cached is not None and cached > prompt:
        figures.drop("cached_tokens", cached, f"more than the {prompt} prompt tokens")
        cached = None
    prefill_n = figures.count("prompt_n", tm.get("prompt_n"))
    if prefill_n is None and prompt is not None and cached is not None:
        prefill_n = prompt - cached
    prefill_s = figures.ms("prompt_ms", tm.get("prompt_ms"))
    decode_s = figures.ms("predicted_ms", tm.get("predicted_ms"))
    decode_n = completion if completion is not None else figures.count("predicted_n", tm.get("predicted_n"))
    counted = decode_n if decode_n is not None else n_deltas
    wall = None
    if t_first is not None and t_last is not None and t_last > t_first and counted > 1:
        wall = (counted - 1) / (t_last - t_first)
    drafted = figures.count("draft_n", tm.get("draft_n"))
    accepted = figures.count("draft_n_accepted", tm.get("draft_n_accepted"))
    if drafted is not None and accepted is not None and accepted > drafted:
        figures.drop("draft_n_accepted", accepted, f"more than the {drafted} guesses")
        accepted = None
    speculated = bool(drafted) and accepted is not None
    prefill_rate = figures.rate("prompt_per_second", tm.get("prompt_per_second"))
    decode_rate = figures.rate("predicted_per_second", tm.get("predicted_per_second"))
    figures.say()
    kv = None
    if info.kind in LLAMA_CPP_KINDS and prompt is not None and decode_n is not None:
        kv = prompt + decode_n  # what the request's slot holds afterwards
    return ReplyStats(
        ttft_s=(t_first - t0) if t_first is not None else None,
        prefill_tokens=prefill_n, cached_tokens=cached, prefill_s=prefill_s,
        prefill_tok_s=prefill_rate,
        decode_tokens=decode_n, decode_s=decode_s,
        decode_tok_s=decode_rate,
        total_s=end - t0, kv_used=kv, n_ctx=info.n_ctx, stop_reason=stop_reason,
        prompt_tokens=prompt, wall_decode_tok_s=wall,
        source=f"{info.kind} at {ep.host}",
        spec_mode="server" if speculated else None, draft_tokens=drafted or 0,
        draft_accepted=(accepted or 0) if speculated else 0,
    )


# What a server may plausibly report; past these a figure is not shown (and not passed on).
MAX_TOKENS = 2**31 - 1  # llama.cpp and vLLM count positions in 32 bits
MAX_MS = 7 * 24 * 3600 * 1000.0  # a week for one reply
MAX_TOK_S = 1e7  # far past any accelerator's decode or prefill rate


class _Figures:
    """A server's usage and timings, range-checked: an implausible figure (1e30 tokens, an
    infinite rate, a negative count, a string) is "not reported", never shown or saved. The
    figures dropped from one reply are said in one line (`say`): a server that sends a bad
    `usage` sends it on every reply, and a warning per field buried the replies themselves."""

    def __init__(self, notice: Notice | None):
        self._notice = notice
        self.dropped: list[str] = []

    def drop(self, name: str, v, why: str | None = None) -> None:
        shown = repr(v) if isinstance(v, str) else str(v)
        self.dropped.append(f"{name} = {shown[:40]} ({why or _implausible(v)})")

    def say(self) -> None:
        if self.dropped and self._notice is not None:
            self._notice(f"the server reported {', '.join(self.dropped)}: shown as not reported")

    def table(self, name: str, v) -> dict:
        if v is None or isinstance(v, dict):
            return v or {}
        self.drop(name, v, f"{_kind(v)}, not an object")
        return {}

    def count(self, name: str, v) -> int | None:
        if v is None:
            return None
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKENS:
            return v
        fraction = isinstance(v, float) and math.isfinite(v) and 0 <= v <= MAX_TOKENS
        self.drop(name, v, "not an integer" if fraction else None)
        return None

    def ms(self, name: str, v) -> float | None:
        if v is None:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_MS:
            return v / 1000
        self.drop(name, v)
        return None

    def rate(self, name: str, v) -> float | None:
        if v is None or v == 0:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= MAX_TOK_S:
            return float(v)
        self.drop(name, v)
        return None


def _implausible(v) -> str:
    """Why a figure is not one, in the words a user would check the server's answer with."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{_kind(v)}, not a number"
    if not math.isfinite(v):
        return "not a finite number"
    return "negative" if v < 0 else "implausible"
