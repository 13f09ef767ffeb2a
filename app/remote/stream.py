"""One streamed completion (chat or plain prompt): engine events while it arrives, one ReplyStats at the end.

Client-side figures are always measured here: TTFT from the request to the
first content delta, the rate at which deltas arrived, the total. The
server's own figures (llama-server's `timings`, any server's `usage`) go
beside them, so network and queueing time show apart from compute. A cut,
stalled or malformed stream ends the reply with what was shown kept and the
failure in `stats.error`, exactly as a local decode error does.
"""

from __future__ import annotations

import threading
import time

import httpx
from httpx_sse import EventSource, SSEError

from app.engine.control import EventSink
from app.engine.events import Finished, FirstToken, TextDelta
from app.engine.prompt import TranscriptFormat, reply_stops
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.remote.endpoint import Endpoint
from app.remote.errors import RemoteError
from app.remote.http import Notice, open_stream, parse_data, transport_reason
from app.remote.server import LLAMA_CPP_KINDS, VLLM, ServerInfo

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
    return body


def chat_body(kind: str, model: str, messages: list[dict], s: GenerationSettings) -> dict:
    """For /chat/completions: the server applies the model's chat template."""
    return {"model": model, "messages": messages, **_sampling(kind, s, tuple(s.stop)[:4])}


def completion_body(kind: str, model: str, prompt: str, s: GenerationSettings,
                    stop: tuple[str, ...]) -> dict:
    """For /completions: a prompt LlamaDesk rendered (the plain transcript of a base model)."""
    return {"model": model, "prompt": prompt, **_sampling(kind, s, stop)}


def request_for(kind: str, model: str, messages: list, s: GenerationSettings,
                transcript: TranscriptFormat | None) -> tuple[str, dict]:
    """(path, body) for `messages` (PromptMessage): the chat endpoint, or with `transcript` the plain
    transcript LlamaDesk renders itself, sent to /completions with the format's stop strings."""
    if transcript is None:
        return "/chat/completions", chat_body(kind, model, [{"role": m.role, "content": m.content}
                                                            for m in messages], s)
    stop = reply_stops(transcript, tuple(s.stop), s.ignore_eos)
    return "/completions", completion_body(kind, model, transcript.render(messages, s.preamble), s, stop)


def _piece(choice: dict) -> str:
    """A chat delta's content, or a completion chunk's text."""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return delta.get("content") or ""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


class _Stopper:
    """Closes the response when the user cancels, so a Stop takes effect at once
    even while the server sends nothing (and the server stops that slot)."""

    def __init__(self, resp: httpx.Response, cancel) -> None:
        self.done = threading.Event()
        self.fired = False
        self._resp, self._cancel = resp, cancel
        if cancel is not None:
            threading.Thread(target=self._watch, name="llamadesk-remote-stop", daemon=True).start()

    def _watch(self) -> None:
        while not self.done.wait(0.05):
            if self._cancel.is_set():
                self.fired = True
                self._resp.close()
                return


def stream_reply(http: httpx.Client, ep: Endpoint, info: ServerInfo, path: str, body: dict,
                 on_event: EventSink | None = None, cancel=None,
                 notice: Notice | None = None) -> tuple[str, ReplyStats]:
    """POST `body` to `path` (/chat/completions or /completions) and follow its stream."""
    emit = on_event or (lambda ev: None)
    t0 = time.perf_counter()
    text: list[str] = []
    n_deltas = 0
    t_first = t_last = t_finish = None
    usage = timings = None
    finish = None
    error = None
    with open_stream(http, ep, path, body, notice) as resp:
        stopper = _Stopper(resp, cancel)
        try:
            for sse in EventSource(resp).iter_sse():
                if cancel is not None and cancel.is_set():
                    break
                if sse.data.strip() == "[DONE]":
                    break
                if not sse.data.strip():
                    continue
                chunk = parse_data(sse.data, ep)
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings
                for choice in chunk.get("choices") or ():
                    piece = _piece(choice)
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
        except (httpx.TransportError, httpx.StreamError, SSEError) as e:
            if not stopper.fired:
                error = (transport_reason(e, ep) if isinstance(e, httpx.TransportError)
                         else f"malformed stream ({e})")
        finally:
            stopper.done.set()
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
    stats = _stats(info, ep, t0, t_first, t_finish or t_last, n_deltas, usage, timings, stop_reason)
    stats.error = error
    full = "".join(text)
    emit(Finished(full, stats))
    return full, stats


def _stats(info: ServerInfo, ep: Endpoint, t0: float, t_first, t_last, n_deltas: int,
           usage: dict | None, timings: dict | None, stop_reason: str) -> ReplyStats:
    end = time.perf_counter()
    usage = usage if isinstance(usage, dict) else {}
    tm = timings if isinstance(timings, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    cached = _int(details.get("cached_tokens"))
    if cached is None:
        cached = _int(tm.get("cache_n"))
    prefill_n = _int(tm.get("prompt_n"))
    if prefill_n is None and prompt is not None and cached is not None:
        prefill_n = prompt - cached
    prefill_s = _ms(tm.get("prompt_ms"))
    decode_s = _ms(tm.get("predicted_ms"))
    decode_n = completion if completion is not None else _int(tm.get("predicted_n"))
    counted = decode_n if decode_n is not None else n_deltas
    wall = None
    if t_first is not None and t_last is not None and t_last > t_first and counted > 1:
        wall = (counted - 1) / (t_last - t_first)
    kv = None
    if info.kind in LLAMA_CPP_KINDS and prompt is not None and decode_n is not None:
        kv = prompt + decode_n  # what the request's slot holds afterwards
    return ReplyStats(
        ttft_s=(t_first - t0) if t_first is not None else None,
        prefill_tokens=prefill_n, cached_tokens=cached, prefill_s=prefill_s,
        prefill_tok_s=_rate(tm.get("prompt_per_second")),
        decode_tokens=decode_n, decode_s=decode_s, decode_tok_s=_rate(tm.get("predicted_per_second")),
        total_s=end - t0, kv_used=kv, n_ctx=info.n_ctx, stop_reason=stop_reason,
        prompt_tokens=prompt, wall_decode_tok_s=wall,
        source=f"{info.kind} at {ep.host}",
    )


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _ms(v) -> float | None:
    return v / 1000 if isinstance(v, (int, float)) and v >= 0 else None


def _rate(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and v > 0 else None
