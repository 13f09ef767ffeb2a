"""/v1/embeddings, and the tokenizer endpoints evaluators and llama.cpp's clients call.

Embeddings run on the side engine (app.serve.side_engine), never on the decode
loop's thread. `dimensions` is refused unless it is the model's own size: a
model trained without Matryoshka truncation gives no meaningful shorter
vector, and cutting one silently would be an answer to another question.
/tokenize, /detokenize and /tokenizer_info speak both vLLM's keys (`prompt`,
`tokens`; what lm-eval's remote tokenizer sends) and llama-server's (`content`).
"""

from __future__ import annotations

import base64
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from app.engine.errors import EngineError
from app.openai_compat.fields import is_text
from app.serve.http import ApiError, bad, read_json, refused
from app.serve.side_engine import SideEngine

router = APIRouter()
MAX_INPUTS = 2048  # OpenAI's own bound on one request's inputs


class EmbeddingsAPI:
    def __init__(self, side: SideEngine, model_id: str, n_ctx: int):
        self.side, self.model_id, self.n_ctx = side, model_id, n_ctx

    def _inputs(self, raw) -> list[str | list[int]]:
        if isinstance(raw, str):
            raw = [raw]
        if isinstance(raw, list) and raw and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
            raw = [raw]  # one input as token ids
        if not isinstance(raw, list) or not raw:
            raise bad("input", "input must be a string, a list of strings, or token ids")
        if len(raw) > MAX_INPUTS:
            raise bad("input", f"at most {MAX_INPUTS} inputs in one request, got {len(raw)}")
        n_vocab = self.side.model.llm.n_vocab()
        for i, x in enumerate(raw):
            if isinstance(x, str):
                if not x.strip() or not is_text(x):
                    raise bad("input", f"input[{i}] must be non-empty valid text")
            elif isinstance(x, list) and x and all(isinstance(t, int) and not isinstance(t, bool) for t in x):
                if not all(0 <= t < n_vocab for t in x):
                    raise bad("input", f"input[{i}] holds a token id outside this model's {n_vocab}")
            else:
                raise bad("input", f"input[{i}] must be a string or a list of token ids")
        return raw

    async def create(self, request: Request) -> JSONResponse:
        try:
            body = await read_json(request)
            if not isinstance(body, dict):
                raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
            for k in body:
                if k not in ("input", "model", "encoding_format", "dimensions", "user"):
                    raise ApiError(400, f"Unrecognized request argument supplied: {k}", k,
                                   "unknown_parameter")
            model = body.get("model")
            if model != self.model_id:
                raise ApiError(404, f"The model {model!r} does not exist (this server has "
                                    f"{self.model_id!r})", "model", "model_not_found")
            fmt = body.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                raise bad("encoding_format", "encoding_format must be float or base64")
            dim = self.side.embedding_dim
            if body.get("dimensions") not in (None, dim):
                raise bad("dimensions", f"this model's embeddings have {dim} dimensions; it was not "
                                        "trained to give shorter ones")
            inputs = self._inputs(body.get("input"))
            too_long = next((i for i, x in enumerate(inputs) if isinstance(x, str)
                             and len(x.encode("utf-8")) > self.n_ctx * 256), None)
            if too_long is not None:
                raise bad("input", f"input[{too_long}] is longer than {self.n_ctx} tokens can be")
            side = self.side

            def job() -> tuple[list[np.ndarray], int]:
                toks = [side.tokenize(x) if isinstance(x, str) else list(x) for x in inputs]
                for i, t in enumerate(toks):
                    if len(t) > self.n_ctx:
                        raise ApiError(400, f"input[{i}] is {len(t)} tokens; embeddings take at most "
                                            f"{self.n_ctx}", "input", "context_length_exceeded")
                return side.embed(toks), sum(len(t) for t in toks)

            try:
                vectors, used = await side.run(job)
            except EngineError as e:
                raise ApiError(500, str(e), None, "embedding_failed", "server_error") from None
        except ApiError as e:
            refused("/v1/embeddings", e)
            raise
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if fmt == "base64"
                 else v.tolist()} for i, v in enumerate(vectors)]
        return JSONResponse({"object": "list", "data": data, "model": self.model_id,
                             "usage": {"prompt_tokens": used, "total_tokens": used}})

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
