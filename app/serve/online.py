"""The online endpoints: /v1/chat/completions, /v1/completions and /v1/models.

Online requests are the latency path: each goes ahead of any batch work
(ServeEngine.submit_online), and past the waiting bound it is refused with 429
at once rather than queued without end. A streaming client that disconnects
has its request cancelled, so its slot is free by the next decode step. A
request for n choices (or a completion's several prompts) is that many slot
requests (app.serve.fan); a completion's `echo` with logprobs scores its
prompt on the side engine, off the decode loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Annotated

import llama_cpp
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse

from app.engine import grammar
from app.engine.events import ReasoningDelta, TextDelta
from app.engine.logprobs import Pieces
from app.engine.sampling import GenerationSettings
from app.serve import logprob_shapes, protocol
from app.serve.disconnect import ClientGone, while_connected
from app.serve.engine_host import Busy, ServeEngine
from app.serve.fan import EventPipe, Fan
from app.serve.http_rules import ApiError, bad, error_response, read_json, refused
from app.serve.metrics import ServeMetrics
from app.serve.openai_params import Parsed, parse
from app.serve.reasoning import ServedThinking
from app.serve.request_log import served
from app.serve.side_engine import SideEngine
from app.slots.types import RequestDone, SlotRequest, SlotResult

log = logging.getLogger("llamadesk.serve")
router = APIRouter()
# Far past any token of a llama.cpp vocabulary (Gemma 3's longest is 48 bytes), so a text refused
# for its size could never have fitted.
MAX_TOKEN_BYTES = 256
CLIENT_GONE = 499  # nginx's "client closed request", in the log and /metrics: no client reads it


def _sse(obj) -> dict:
    return {"data": json.dumps(obj, ensure_ascii=False)}


@dataclass
class Echo:
    """A completion's prompt as `echo` returns it: its text and, when asked, its tokens' logprobs."""

    text: str
    logprobs: logprob_shapes.CompletionLogprobs | None = None


@dataclass
class Call:
    """One HTTP request on its way: what it asked, its slot requests' events, and its echoes."""

    kind: protocol.Kind
    p: Parsed
    fan: Fan
    echoes: list[Echo]
    ident: str = ""

    @property
    def endpoint(self) -> str:
        return "/v1/chat/completions" if self.kind == "chat" else "/v1/completions"


class OnlineAPI:
    def __init__(self, host: ServeEngine, model_id: str, metrics: ServeMetrics,
                 defaults: GenerationSettings | None = None, side: SideEngine | None = None,
                 reasoning_format: str = "auto"):
        """`reasoning_format`: how a thinking model's replies are handed back when a request does
        not say (`--reasoning-format`: "none" keeps them whole in `content`)."""
        self.host, self.model_id, self.metrics, self.side = host, model_id, metrics, side
        self.defaults = defaults or GenerationSettings()
        self.thinking = ServedThinking(host.model, reasoning_format != "none")
        self.created = int(time.time())
        llm = host.model.llm
        self.n_vocab = llm.n_vocab()
        self.vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self.bos = llm.token_bos()
        self.pieces = Pieces(llm)

    def models(self) -> protocol.ModelList:
        return protocol.model_list(self.model_id, self.created, self.host.slot_ctx)

    def model(self, model_id: str) -> protocol.Model:
        if model_id != self.model_id:
            raise ApiError(404, f"The model {model_id!r} does not exist (this server has {self.model_id!r})",
                           "model", "model_not_found")
        return protocol.model_object(self.model_id, self.created, self.host.slot_ctx)

    def _too_long(self, text_bytes: int, param: str) -> None:
        """Refuse by size, before tokenizing: no token is longer than MAX_TOKEN_BYTES, so a text
        past slot_ctx x that cannot fit, and tokenizing megabytes would hold a thread for seconds."""
        if text_bytes > self.host.slot_ctx * MAX_TOKEN_BYTES:
            raise ApiError(400, f"the {param} is {text_bytes} bytes, more than a slot of "
                                f"{self.host.slot_ctx} tokens can hold", param, "context_length_exceeded")

    def _check_ids(self, p: Parsed) -> None:
        bad_bias = next((t for t, _ in p.settings.logit_bias if t >= self.n_vocab), None)
        if bad_bias is not None:
            raise bad("logit_bias", f"logit_bias names token {bad_bias}; this model's vocabulary has "
                                    f"{self.n_vocab}")
        for i, x in enumerate(p.prompts or ()):
            if isinstance(x, list) and max(x) >= self.n_vocab:
                raise bad("prompt", f"prompt[{i}] holds token {max(x)}; this model's vocabulary has "
                                    f"{self.n_vocab}")

    async def _tokens(self, prompt: str | list[int], where: str) -> list[int]:
        if isinstance(prompt, list):
            toks = prompt  # token ids are taken as they are: an evaluator counts positions in them
        else:
            data = prompt.encode("utf-8")
            self._too_long(len(data), "prompt")
            llm = self.host.model.llm  # the weights' vocabulary: tokenizing is safe off the engine thread
            toks = await asyncio.to_thread(llm.tokenize, data, add_bos=True, special=False)
        if len(toks) >= self.host.slot_ctx:
            raise ApiError(400, f"the {where} is {len(toks)} tokens; a slot holds {self.host.slot_ctx}",
                           "prompt", "context_length_exceeded")
        return toks

    async def _echo(self, prompt: str | list[int], toks: list[int], k: int | None) -> Echo:
        """The prompt as echo shows it (the BOS this server added is not the client's text)."""
        shown = toks[1:] if isinstance(prompt, str) and toks and toks[0] == self.bos else toks
        text = prompt if isinstance(prompt, str) else self._detokenize(toks)
        if k is None:
            return Echo(text)
        if self.side is None:
            raise bad("echo", "echo with logprobs needs the scoring engine, which this server has not")
        side = self.side
        scored = await side.run(lambda: side.score(toks, k))
        entries = scored[len(toks) - len(shown):]
        return Echo(text, logprob_shapes.completion(shown, entries, self.pieces))

    def _detokenize(self, toks: list[int]) -> str:
        return b"".join(map(self.pieces, toks)).decode("utf-8", "replace")

    async def _requests(self, p: Parsed) -> tuple[list[SlotRequest], list[Echo]]:
        if p.model != self.model_id:
            raise ApiError(404, f"The model {p.model!r} does not exist (this server has {self.model_id!r})",
                           "model", "model_not_found")
        self._check_ids(p)

        def choices(first: SlotRequest) -> list[SlotRequest]:
            seed = p.settings.seed  # None: each choice its own random seed
            return [first if j == 0 else replace(first, settings=replace(
                first.settings, seed=None if seed is None else (seed + j) & 0xFFFFFFFF))
                for j in range(p.n)]

        if p.messages is not None:
            self._too_long(sum(len(m.content.encode("utf-8")) for m in p.messages), "messages")
            fields = self.thinking.request_fields(p)
            return choices(SlotRequest("", p.messages, reply_as=p.tools, **fields)), []
        reqs, echoes = [], []
        for i, prompt in enumerate(p.prompts or ()):
            toks = await self._tokens(prompt, "prompt" if len(p.prompts or ()) == 1 else f"prompt[{i}]")
            if p.echo:
                echoes.append(await self._echo(prompt, toks, p.settings.logprobs))
            reqs += choices(SlotRequest("", settings=p.settings, prompt_tokens=toks, verbatim=True))
        return reqs, echoes

    async def _keepable(self, p: Parsed) -> None:
        """A constraint that compiles can still fail in the matcher on this vocabulary (a pattern
        whose lexer blows up): tried here, on a thread, it is a 400 before the engine sees it."""
        c = p.settings.constraint
        if c is None:
            return
        try:
            await asyncio.to_thread(grammar.check, c, self.vocab, self.n_vocab)
        except grammar.GrammarError as e:
            raise bad(p.constraint_param or "response_format", str(e)) from None

    async def start(self, p: Parsed) -> tuple[Fan, list[Echo]]:
        """Queue a checked request's slot requests: their events, and the prompts' echoes."""
        reqs, echoes = await self._requests(p)
        await self._keepable(p)
        fan = Fan(EventPipe(asyncio.get_running_loop()))
        if not p.generate:
            return fan, echoes
        try:
            for i, req in enumerate(reqs):
                fan.rids.append(self.host.submit_online(req, fan.sink(i)))
        except Busy:
            for rid in fan.rids:
                self.host.cancel(rid)
            raise ApiError(429, "too many requests are waiting for a slot; retry shortly", None,
                           "rate_limit_exceeded", "rate_limit_error", {"Retry-After": "1"}) from None
        return fan, echoes

    def events(self, fan: Fan):
        return fan.events(self.host.cancel)

    def _refuse(self, endpoint: str, e: ApiError) -> JSONResponse:
        self.metrics.requests.labels(endpoint, str(e.status)).inc()
        refused(endpoint, e)
        return error_response(e)

    async def run(self, raw: Request, kind: protocol.Kind):
        endpoint = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
        try:
            p = parse(await read_json(raw), kind, self.defaults)
            fan, echoes = await self.start(p)
        except ApiError as e:
            return self._refuse(endpoint, e)
        call = Call(kind, p, fan, echoes, protocol.completion_id(kind, uuid.uuid4().hex[:24]))
        if not p.generate:
            return self._echo_only(call)
        if p.stream:
            return EventSourceResponse(self._stream(call), ping=15)
        return await self._whole(call, raw)

    def _answer(self, call: Call, index: int, res: SlotResult) -> protocol.Answer:
        """A choice's answer; a completion's with its prompt's echo ahead of it."""
        st, p = res.stats, call.p
        first_of_prompt = index % p.n == 0
        shown = logprob_shapes.Visible(self.pieces, call.kind == "chat").take(
            res.logprobs[:st.completion_tokens or 0] if call.kind == "chat" else res.logprobs,
            logprob_shapes.shown_bytes(res.text, res.reasoning))
        if call.kind == "chat":
            lp = logprob_shapes.chat(shown, self.pieces) if p.logprobs else None
            return protocol.Answer(res.text, st, lp, first_of_prompt, res.reasoning)
        echo = call.echoes[index // p.n] if p.echo else Echo("")
        clp = None
        if p.logprobs:
            gen = logprob_shapes.completion([e.token for e in shown], shown, self.pieces, len(echo.text))
            clp = logprob_shapes.merge(echo.logprobs, gen) if echo.logprobs is not None else gen
        return protocol.Answer(echo.text + res.text, st, clp, first_of_prompt)

    def _failed(self, call: Call, results: dict[int, SlotResult]) -> SlotResult | None:
        return next((r for r in results.values() if r.stats.error is not None), None)

    async def _results(self, call: Call) -> dict[int, SlotResult]:
        results: dict[int, SlotResult] = {}
        async with aclosing(self.events(call.fan)) as events:
            async for i, ev in events:
                if isinstance(ev, RequestDone):
                    results[i] = ev.result
                    if ev.result.stats.error is not None:
                        break  # one choice failed: the request has; the others are cancelled
        return results

    def gone(self, endpoint: str) -> Response:
        """A whole reply's client left before it was ready: its slots are free already."""
        self.metrics.requests.labels(endpoint, str(CLIENT_GONE)).inc()
        served("POST", endpoint, CLIENT_GONE, self.model_id, [], "the client went away before the reply")
        return Response(status_code=CLIENT_GONE)

    async def _whole(self, call: Call, raw: Request):
        try:
            results = await while_connected(raw, self._results(call))
        except ClientGone:
            return self.gone(call.endpoint)
        stats = [r.stats for r in results.values()]
        failed = self._failed(call, results)
        if failed is not None:
            st = failed.stats
            code = 400 if st.error_kind in ("context_overflow", "invalid_request") else 500
            kind_of = "invalid_request_error" if code == 400 else "server_error"
            served("POST", call.endpoint, code, self.model_id, stats, st.error)
            self.metrics.requests.labels(call.endpoint, str(code)).inc()
            return error_response(ApiError(code, st.error or "", None, st.error_kind, kind_of))
        answers = [self._answer(call, i, results[i]) for i in sorted(results)]
        self.metrics.requests.labels(call.endpoint, "200").inc()
        served("POST", call.endpoint, 200, self.model_id, stats)
        return JSONResponse(protocol.completion(call.kind, call.ident, self.model_id, answers, call.p.tools))

    def _echo_only(self, call: Call) -> JSONResponse:
        """echo with max_tokens 0: the prompts scored, nothing generated (an evaluator's request)."""
        choices = [{"index": i, "text": e.text, "logprobs": e.logprobs, "finish_reason": "length"}
                   for i, e in enumerate(call.echoes) for _ in range(call.p.n)]
        n_prompt = sum(len(e.logprobs["tokens"]) if e.logprobs else 0 for e in call.echoes)
        self.metrics.requests.labels(call.endpoint, "200").inc()
        served("POST", call.endpoint, 200, self.model_id, [])
        return JSONResponse({"id": call.ident, "object": "text_completion", "created": int(time.time()),
                             "model": self.model_id, "choices": choices,
                             "usage": {"prompt_tokens": n_prompt, "completion_tokens": 0,
                                       "total_tokens": n_prompt,
                                       "prompt_tokens_details": {"cached_tokens": 0}}})

    async def _stream(self, call: Call):
        """Text as it comes, each choice's chunks with its index; a tool-format reply once it is
        whole, as OpenAI's tool_calls deltas (its JSON is the format's, not the answer: it is
        read before anything is sent)."""
        kind, ident, model, p = call.kind, call.ident, self.model_id, call.p
        if kind == "chat":
            for i in range(len(call.fan.rids)):
                yield _sse(protocol.chunk(kind, ident, model, None, role=True, index=i))
        elif p.echo:  # the prompt first, as OpenAI streams an echo
            for i in range(len(call.fan.rids)):
                e = call.echoes[i // p.n]
                yield _sse(protocol.chunk(kind, ident, model, e.text, index=i, logprobs=e.logprobs))
        n = len(call.fan.rids)
        offset = {i: len(call.echoes[i // p.n].text) if p.echo else 0 for i in range(n)}
        shown = {i: logprob_shapes.Visible(self.pieces, kind == "chat") for i in range(n)}
        visible = dict.fromkeys(range(n), 0)  # bytes of each choice's text so far
        answers: dict[int, protocol.Answer] = {}
        async for i, ev in self.events(call.fan):
            if isinstance(ev, ReasoningDelta):  # a thinking reply's, never the tool format's JSON
                yield _sse(protocol.chunk(kind, ident, model, ev.text, index=i, reasoning=True))
                # The answer's deltas carry the tokens of the marker the split took out: counted
                # against the answer's bytes alone, the answer's own tokens would be cut.
                visible[i] = logprob_shapes.shown_bytes("", ev.text)
            elif isinstance(ev, TextDelta) and p.tools is None:
                visible[i] += len(ev.text.encode("utf-8"))
                lp = self._logprobs(kind, shown[i].take(ev.logprobs, visible[i]), offset[i]) \
                    if p.logprobs else None
                yield _sse(protocol.chunk(kind, ident, model, ev.text, index=i, logprobs=lp))
                offset[i] += len(ev.text)
            elif isinstance(ev, RequestDone):
                res = ev.result
                st = res.stats
                if st.error is not None:  # the stream has begun: the error goes in it
                    self.metrics.requests.labels(call.endpoint, "500").inc()
                    served("POST", call.endpoint, 500, model, [st], st.error)
                    own = st.error_kind == "invalid_request"  # the request's constraint broke down
                    kind_of = "invalid_request_error" if own else "server_error"
                    yield _sse(protocol.error_body(st.error, kind_of, None, st.error_kind))
                    return
                finish = None
                if p.tools is not None:
                    chunks, finish = protocol.tool_reply_chunks(ident, model, res.text, p.tools, st, i)
                    for c in chunks:
                        yield _sse(c)
                rest = shown[i].take(res.logprobs[shown[i].consumed:], visible[i]) \
                    if p.logprobs and kind == "completion" else ()
                if rest:  # the end-of-generation token's: it has no text, so no delta carried it
                    yield _sse(protocol.chunk(kind, ident, model, "", index=i,
                                              logprobs=self._logprobs(kind, rest, offset[i])))
                yield _sse(protocol.finish_chunk(kind, ident, model, st, finish, i))
                answers[i] = protocol.Answer(res.text, st, None, i % p.n == 0, res.reasoning)
        self.metrics.requests.labels(call.endpoint, "200").inc()
        ordered = [answers[i] for i in sorted(answers)]
        served("POST", call.endpoint, 200, model, [a.stats for a in ordered])
        if p.include_usage:
            yield _sse(protocol.usage_chunk(kind, ident, model, ordered))
        yield {"data": "[DONE]"}

    def _logprobs(self, kind: protocol.Kind, entries, offset: int):
        if kind == "chat":
            return logprob_shapes.chat(entries, self.pieces)
        return logprob_shapes.completion([e.token for e in entries], entries, self.pieces, offset)


async def _online(request: Request) -> OnlineAPI:
    return request.app.state.online


Online = Annotated[OnlineAPI, Depends(_online)]


@router.get("/v1/models")
async def models(api: Online):
    return JSONResponse(api.models())


@router.get("/v1/models/{model_id:path}")
async def model(model_id: str, api: Online):
    try:
        return JSONResponse(api.model(model_id))
    except ApiError as e:
        refused("/v1/models/{id}", e)
        return error_response(e)


@router.post("/v1/chat/completions")
async def chat(request: Request, api: Online):
    return await api.run(request, "chat")


@router.post("/v1/completions")
async def completions(request: Request, api: Online):
    return await api.run(request, "completion")
