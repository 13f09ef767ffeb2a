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
from dataclasses import dataclass

import httpx
from httpx_sse import EventSource, SSEError

from app.engine.control import EventSink
from app.engine.events import Finished, FirstToken, ReasoningDelta, TextDelta
from app.engine.grammar import Constraint
from app.engine.prompt import TranscriptFormat, reply_stops
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, RemoteError
from app.remote.reasoning import reasoning_text, thinking_fields
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
    return {"model": model, "messages": messages, **_sampling(kind, s, tuple(s.stop)[:4]),
            **thinking_fields(kind, s)}


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


def _delta(choice: dict, ep: Endpoint) -> dict | None:
    """A chat chunk's delta, or a whole reply's message read as one (None: a completion's text)."""
    delta = choice.get("delta", choice.get("message"))
    if delta is not None and not isinstance(delta, dict):
        raise RemoteError(ep.base_url, f"{MALFORMED} (a choice's 'delta' is {_kind(delta)})")
    return delta


def _piece(choice: dict, delta: dict | None, ep: Endpoint) -> str:
    """A chat delta's content, or a completion chunk's text."""
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


@dataclass
class _Times:
    """When each kind of text first and last arrived (perf_counter; None: it did not)."""

    t0: float
    first: float | None = None  # the first token of either kind: TTFT
    last: float | None = None
    finish: float | None = None
    answer: float | None = None  # the first answer text or tool call: TTFA
    thought: float | None = None  # the first and last thinking text
    thought_last: float | None = None


class _Reader:
    """One reply's chunks taken in: the answer and the thinking kept apart, each cleaned as the
    text is (_Text), and the times of both, which the figures depend on."""

    def __init__(self, ep: Endpoint, emit, notice: Notice | None, calls: ToolCallDeltas | None):
        self.ep, self.emit, self.calls = ep, emit, calls
        self.shown, self.thinking = _Text(notice), _Text(notice)
        self.times = _Times(time.perf_counter())
        self.n_deltas = 0  # text deltas of either kind: a count of tokens when the server gives none
        self.usage: dict | None = None
        self.timings: dict | None = None
        self.finish: str | None = None

    def take(self, chunk: dict) -> None:
        self.usage = chunk.get("usage") or self.usage
        self.timings = chunk.get("timings") or self.timings
        for choice in _choices(chunk, self.ep):
            delta = _delta(choice, self.ep)
            thought, bad = reasoning_text(delta) if delta is not None else ("", None)
            bad = bad or (self.calls.feed(delta) if self.calls is not None else None)
            if bad is not None:
                raise RemoteError(self.ep.base_url, f"{MALFORMED} ({bad})")
            thought = self.thinking.clean(thought)
            if thought:
                self._text(thought, self.thinking.parts, ReasoningDelta, True)
            if self.calls is not None and self.times.answer is None and self.calls.calls():
                self._seen(time.perf_counter(), False)  # a reply of calls alone has its first token here
            piece = self.shown.clean(_piece(choice, delta, self.ep))
            if piece:
                self._text(piece, self.shown.parts, TextDelta, False)
            if choice.get("finish_reason") and self.times.finish is None:
                self.times.finish = time.perf_counter()
            self.finish = choice.get("finish_reason") or self.finish

    def _seen(self, now: float, thought: bool) -> None:
        t = self.times
        if t.first is None:
            t.first = now
            self.emit(FirstToken(now - t.t0))
        if thought:
            t.thought = t.thought if t.thought is not None else now
            t.thought_last = now
        elif t.answer is None:
            t.answer = now

    def _text(self, piece: str, parts: list[str], event, thought: bool) -> None:
        now = time.perf_counter()
        self._seen(now, thought)
        self.times.last = now
        self.n_deltas += 1
        parts.append(piece)
        self.emit(event(piece, self.n_deltas, now))

    def tails(self) -> None:
        """A high surrogate held back for its pair that never came, shown as U+FFFD."""
        for text, event in ((self.thinking, ReasoningDelta), (self.shown, TextDelta)):
            tail = text.tail()
            if tail:
                text.parts.append(tail)
                self.emit(event(tail, self.n_deltas, time.perf_counter()))


def _whole(resp: httpx.Response | None) -> bool:
    """A server (or a proxy before it) that answered a streamed request with one JSON reply."""
    ctype = resp.headers.get("content-type", "") if resp is not None else ""
    return "json" in ctype and "event-stream" not in ctype


def stream_reply(http: httpx.Client, ep: Endpoint, info: ServerInfo, path: str, body: dict,
                 on_event: EventSink | None = None, cancel=None,
                 notice: Notice | None = None, calls: ToolCallDeltas | None = None
                 ) -> tuple[str, ReplyStats, str]:
    """POST `body` to `path` (/chat/completions or /completions) and follow its stream; `calls`
    collects the reply's streamed tool calls (a request that gave the server tools). Returns the
    answer, its stats, and the thinking the server sent apart from the answer ("" : none)."""
    r = _Reader(ep, on_event or (lambda ev: None), notice, calls)
    error = None
    with open_stream(http, ep, path, body, notice, cancel) as resp:  # None: stopped before it began
        stopper = _Stopper(resp, cancel)
        try:
            ended = _whole(resp)  # one JSON reply, whole: it ends where it ends
            if ended and resp is not None:
                r.take(parse_data(resp.read().decode("utf-8", "replace"), ep))
            for sse in EventSource(resp).iter_sse() if resp is not None and not ended else ():
                if (cancel is not None and cancel.is_set()) or sse.data.strip() == "[DONE]":
                    ended = True
                    break
                if sse.data.strip():
                    r.take(parse_data(sse.data, ep))
            if not ended and r.finish is None:
                error = "the stream ended before the reply finished"
        except RemoteError as e:
            error = e.reason
        except (httpx.TransportError, httpx.DecodingError, httpx.StreamError, SSEError) as e:
            if not stopper.fired:
                error = (transport_reason(e, ep) if isinstance(e, (httpx.TransportError, httpx.DecodingError))
                         else f"malformed stream ({ep.scrub(str(e))})")
        finally:
            stopper.done.set()
    r.tails()
    cancelled = cancel is not None and cancel.is_set()
    if cancelled:
        stop_reason = "cancelled"
        error = None
    elif error is not None:
        stop_reason = "error"
    else:
        stop_reason = _FINISH.get(r.finish or "stop", "stop")
    stats = _stats(info, ep, r.times, r.n_deltas, r.usage, r.timings, stop_reason, notice)
    stats.error = error
    full = "".join(r.shown.parts)
    r.emit(Finished(full, stats))
    return full, stats, "".join(r.thinking.parts)


def _stats(info: ServerInfo, ep: Endpoint, times: _Times, n_deltas: int,
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
    reasoning_n = _reasoning_tokens(figures, usage, decode_n, times.thought is not None)
    counted = decode_n if decode_n is not None else n_deltas
    # The rate as received: over the span the count covers, which for a thinking model starts at
    # its first thought (the server counts thinking tokens in completion_tokens too). The span
    # runs to the finish, not to the last text: a server holds back text that might begin a stop
    # string, and the tokens it then drops were generated all the same.
    t_first, t_last = times.first, times.finish or times.last
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
    began, ended = times.thought, times.thought_last
    return ReplyStats(
        ttft_s=(t_first - times.t0) if t_first is not None else None,
        prefill_tokens=prefill_n, cached_tokens=cached, prefill_s=prefill_s,
        prefill_tok_s=prefill_rate,
        decode_tokens=decode_n, decode_s=decode_s,
        decode_tok_s=decode_rate,
        total_s=end - times.t0, kv_used=kv, n_ctx=info.n_ctx, stop_reason=stop_reason,
        prompt_tokens=prompt, wall_decode_tok_s=wall,
        source=f"{info.kind} at {ep.host}",
        spec_mode="server" if speculated else None, draft_tokens=drafted or 0,
        draft_accepted=(accepted or 0) if speculated else 0,
        reasoning_tokens=reasoning_n,
        reasoning_s=(ended - began) if began is not None and ended is not None else None,
        ttfa_s=(times.answer - times.t0) if began is not None and times.answer is not None else None,
    )


def _reasoning_tokens(figures: _Figures, usage: dict, completion: int | None, thought: bool) -> int | None:
    """OpenAI's `completion_tokens_details.reasoning_tokens`, the one count of thinking a server
    gives (never estimated from the text: tokens are the server's to count). A 0 beside no
    thinking is a plain reply's, and reads as "no reasoning"; a count beside no text is a model
    that thinks out of sight (OpenAI's own), and is kept."""
    details = figures.table("completion_tokens_details", usage.get("completion_tokens_details"))
    n = figures.count("reasoning_tokens", details.get("reasoning_tokens"))
    if n is not None and completion is not None and n > completion:
        figures.drop("reasoning_tokens", n, f"more than the {completion} completion tokens")
        return None
    return None if n == 0 and not thought else n


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
