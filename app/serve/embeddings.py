"""/v1/embeddings, and the tokenizer endpoints evaluators and llama.cpp's clients call.

Embeddings run on the side engine (app.serve.side_engine), never on the decode
loop's thread. `dimensions` is refused unless it is the model's own size: a
model trained without Matryoshka truncation gives no meaningful shorter
vector, and cutting one silently would be an answer to another question.
/tokenize, /detokenize and /tokenizer_info speak both vLLM's keys (`prompt`,
`tokens`; what lm-eval's remote tokenizer sends) and llama-server's (`content`).
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from app.engine.errors import EngineError
from app.openai_compat.embeddings import URL, embedding_body, parse_embedding
from app.openai_compat.fields import is_text
from app.openai_compat.refusal import RequestError
from app.serve.http_rules import ApiError, bad, read_json, refused
from app.serve.request_log import answered
from app.serve.side_engine import SideEngine

router = APIRouter()


class EmbeddingsAPI:
    def __init__(self, side: SideEngine, model_id: str, n_ctx: int):
        self.side, self.model_id, self.n_ctx = side, model_id, n_ctx

    async def create(self, request: Request) -> JSONResponse:
        t0 = time.perf_counter()
        try:
            try:
                req = parse_embedding(await read_json(request), self.model_id, self.side.facts)
                vectors, used = await self.side.run(lambda: self.side.embed_request(req))
            except RequestError as e:
                raise ApiError(e.status, e.message, e.param, e.code, e.kind) from None
            except EngineError as e:
                raise ApiError(500, str(e), None, "embedding_failed", "server_error") from None
        except ApiError as e:
            refused(URL, e)
            raise
        answered("POST", URL, 200, self.model_id, time.perf_counter() - t0, prompt=used, inputs=len(vectors))
        return JSONResponse(embedding_body(vectors, req.fmt, self.model_id, used))

    async def tokenize(self, request: Request) -> JSONResponse:
        body = await read_json(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
        text = body.get("prompt", body.get("content"))
        if not isinstance(text, str) or not is_text(text):
            raise bad("prompt", "prompt (or content) must be text")
        special = body.get("add_special_tokens", True)
        if not isinstance(special, bool):
            raise bad("add_special_tokens", "add_special_tokens must be true or false")
        toks = await self.side.run(lambda: self.side.tokenize(text, add_bos=special))
        return JSONResponse({"tokens": toks, "count": len(toks), "max_model_len": self.n_ctx})

    async def detokenize(self, request: Request) -> JSONResponse:
        body = await read_json(request)
        toks = body.get("tokens") if isinstance(body, dict) else None
        n_vocab = self.side.model.llm.n_vocab()
        if not isinstance(toks, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                 and 0 <= t < n_vocab for t in toks):
            raise bad("tokens", f"tokens must be a list of token ids below {n_vocab}")
        text = self.side.model.llm.detokenize(toks).decode("utf-8", "replace")
        return JSONResponse({"prompt": text, "content": text})

    def tokenizer_info(self) -> JSONResponse:
        llm = self.side.model.llm
        piece = lambda t: llm.detokenize([t], special=True).decode("utf-8", "replace")
        return JSONResponse({"bos_token": piece(llm.token_bos()), "eos_token": piece(llm.token_eos()),
                             "pad_token": None, "model_max_length": self.n_ctx, "chat_template": None})


async def _api(request: Request) -> EmbeddingsAPI:
    return request.app.state.embeddings


Api = Annotated[EmbeddingsAPI, Depends(_api)]


@router.post("/v1/embeddings")
async def embeddings(request: Request, api: Api):
    return await api.create(request)


@router.post("/tokenize")
async def tokenize(request: Request, api: Api):
    return await api.tokenize(request)


@router.post("/detokenize")
async def detokenize(request: Request, api: Api):
    return await api.detokenize(request)


@router.get("/tokenizer_info")
async def tokenizer_info(api: Api):
    return api.tokenizer_info()
