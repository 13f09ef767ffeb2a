"""A tiny real HTTP server that stands in for vLLM's WIRE FORM ONLY, for the reasoning tests.

There is no vLLM on these machines (it needs a GPU build), and llama-server sends its thinking
as `reasoning_content`. This Starlette app, served by uvicorn on a real socket, answers the
probe as vLLM does (`/v1/models` with `max_model_len`, `/version`) and streams a chat reply in
vLLM's documented shape: the thinking in `delta.reasoning` (vLLM's name since its rename), the
answer in `delta.content`, the finish, then a usage chunk with `choices: []` and
`completion_tokens_details.reasoning_tokens`, then `[DONE]`. It models nothing of vLLM but those
bytes. `mode` switches to OpenRouter's shape (`reasoning` beside `reasoning_details` carrying the
same words) or to one whole JSON reply, as a buffering proxy returns a streamed request.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from app.bench.servers import free_port

MODEL = "Qwen/Qwen3-0.6B"
THOUGHT = ["Okay", ", the", " user", " wants", " a", " colour", ".", " Blue", " is", " fine", "."]
ANSWER = ["Blue", "."]
PROMPT_TOKENS = 14


class StandIn:
    def __init__(self, every_s: float = 0.03):
        self.every_s = every_s
        self.mode = "vllm"  # "vllm", "openrouter", "whole", or "bad" (a number for the thinking)
        self.bodies: list[dict] = []
        self.reasoning_tokens: int | None = len(THOUGHT)
        app = Starlette(routes=[
            Route("/v1/models", self._models),
            Route("/version", self._version),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
        ])
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, name="vllm-standin", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the vLLM stand-in did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    async def _models(self, request: Request):
        return JSONResponse({"object": "list", "data": [
            {"id": MODEL, "object": "model", "owned_by": "vllm", "max_model_len": 4096}]})

    async def _version(self, request: Request):
        return JSONResponse({"version": "0.26.0"})

    def _usage(self) -> dict:
        n = len(THOUGHT) + len(ANSWER)
        usage: dict = {"prompt_tokens": PROMPT_TOKENS, "total_tokens": PROMPT_TOKENS + n,
                       "completion_tokens": n}
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return usage

    async def _chat(self, request: Request):
        body = await request.json()
        self.bodies.append(body)
        if self.mode == "whole":
            return JSONResponse({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": MODEL,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "reasoning": "".join(THOUGHT), "content": "".join(ANSWER)}}],
                "usage": self._usage()})
        return StreamingResponse(self._stream(), media_type="text/event-stream")

    async def _stream(self):
        def chunk(delta: dict | None, finish: str | None = None, **extra) -> str:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                                 "finish_reason": finish}]
            return "data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                                          "model": MODEL, "choices": choices, **extra}) + "\n\n"

        yield chunk({"role": "assistant", "content": ""})
        for word in THOUGHT:
            await asyncio.sleep(self.every_s)
            delta: dict = {"reasoning": word if self.mode != "bad" else 42}
            if self.mode == "openrouter":  # the same words again, structured: read once
                delta["reasoning_details"] = [{"type": "reasoning.text", "text": word, "format": "unknown",
                                               "index": 0}]
            yield chunk(delta)
        for word in ANSWER:
            await asyncio.sleep(self.every_s)
            yield chunk({"content": word, "reasoning": None})
        yield chunk({}, "stop")
        yield chunk(None, usage=self._usage())
        yield "data: [DONE]\n\n"
