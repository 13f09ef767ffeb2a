"""/v1/batches: OpenAI's Batch API (create, list, retrieve, cancel) on the server's own engine.

The routes are thin async shells; what they do reads and writes SQLite or
starts a batch's thread, so it is a method of `Batches`, run in a worker
thread, off the event loop that every online token goes through.

A create call is checked whole before anything is stored: a field this
server does not honour (`output_expires_after`, say) is refused rather than
dropped, and metadata is held to OpenAI's rules (up to 16 string pairs) and
to valid Unicode, since a stored value no encoder takes would fail every
later listing, everyone's.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.batch_jsonl.requests import CHAT_URL
from app.openai_compat.embeddings import URL as EMBEDDINGS_URL
from app.serve.batch_api_runs import BatchRuns
from app.serve.batch_api_store import BatchStore
from app.serve.http_rules import ApiError, bad, not_found, only_query, page, printable, read_json
from app.serve.protocol import BatchList, BatchObject, batch_list, batch_object

router = APIRouter()
ENDPOINTS = (CHAT_URL, EMBEDDINGS_URL)
CREATE_FIELDS = ("input_file_id", "endpoint", "completion_window", "metadata")
NOT_HONOURED = {"output_expires_after": "the output files are kept until the server's data folder is cleared"}
META_PAIRS, META_KEY, META_VALUE = 16, 64, 512


def check_metadata(meta) -> None:
    """OpenAI's metadata: up to 16 pairs, string keys of up to 64 characters, string values of
    up to 512, and here valid Unicode (a lone surrogate would be stored and fail every listing)."""
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise bad("metadata", "metadata must be an object of string values")
    if len(meta) > META_PAIRS:
        raise bad("metadata", f"metadata has {len(meta)} pairs; at most {META_PAIRS}")
    for k, v in meta.items():
        if not isinstance(v, str):
            raise bad("metadata", f"metadata[{printable(k)!r}] must be a string")
        if len(k) > META_KEY or len(v) > META_VALUE:
            raise bad("metadata", f"metadata keys are at most {META_KEY} characters and values at most "
                                  f"{META_VALUE} ({printable(k)[:META_KEY]!r} is longer)")
        if printable(k) != k or printable(v) != v:
            raise bad("metadata", f"metadata[{printable(k)!r}] is not valid Unicode (a lone surrogate)")


class Batches:
    """The Batch API's state: the store and the batches running. Every method blocks."""

    def __init__(self, store: BatchStore, runs: BatchRuns):
        self.store, self.runs = store, runs

    def _found(self, bid: str) -> dict:
        row = self.store.batch(bid)
        if row is None:
            raise not_found("batch", bid)
        return self.runs.shown(row)

    def create(self, body) -> BatchObject:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
        for k in body:
            if k not in CREATE_FIELDS:
                why = NOT_HONOURED.get(k, f"a batch is created from {', '.join(CREATE_FIELDS)}")
                raise ApiError(400, f"Unrecognized request argument supplied: {printable(k)} ({why})", k,
                               "unknown_parameter")
        fid, endpoint, window = body.get("input_file_id"), body.get("endpoint"), body.get("completion_window")
        row = self.store.file(fid) if isinstance(fid, str) else None
        if row is None:
            raise ApiError(404 if isinstance(fid, str) else 400, f"No such file: {fid!r}", "input_file_id",
                           "not_found" if isinstance(fid, str) else "invalid_value")
        if row["purpose"] != "batch":
            raise bad("input_file_id", f"{fid} is a {row['purpose']} file; a batch's input is uploaded "
                                       "with purpose 'batch'")
        if endpoint not in ENDPOINTS:
            raise bad("endpoint", f"endpoint must be one of {', '.join(ENDPOINTS)}")
        if window != "24h":
            raise bad("completion_window", "completion_window must be '24h'")
        meta = body.get("metadata")
        check_metadata(meta)
        try:
            self.runs.check(row["path"])
        except ValueError as e:
            raise bad("input_file_id", f"{fid} cannot run here: {e}") from None
        bid = self.store.add_batch(fid, endpoint, window, meta)["id"]
        self.runs.start(bid)
        return batch_object(self._found(bid))

    def listing(self, limit: int, after: str | None) -> BatchList:
        rows, more = page(self.store.batches(), limit, after, "batch")
        listed = batch_list([self.runs.shown(r) for r in rows])
        listed["has_more"] = more
        return listed

    def get(self, bid: str) -> BatchObject:
        return batch_object(self._found(bid))

    def cancel(self, bid: str) -> BatchObject:
        if self._found(bid)["status"] in ("validating", "in_progress"):
            self.store.update(bid, status="cancelling", cancelling_at=int(time.time()))
            self.runs.cancel(bid)
        return batch_object(self._found(bid))


async def _batches(request: Request) -> Batches:
    return request.app.state.batches


Api = Annotated[Batches, Depends(_batches)]


@router.post("/v1/batches")
async def create(request: Request, api: Api):
    only_query(request)
    body = await read_json(request)
    return JSONResponse(await run_in_threadpool(api.create, body))


@router.get("/v1/batches")
async def list_batches(request: Request, api: Api, limit: int = 20, after: str | None = None):
    only_query(request, "limit", "after")
    return JSONResponse(await run_in_threadpool(api.listing, limit, after))


@router.get("/v1/batches/{bid}")
async def get_batch(request: Request, bid: str, api: Api):
    only_query(request)
    return JSONResponse(await run_in_threadpool(api.get, bid))


@router.post("/v1/batches/{bid}/cancel")
async def cancel(request: Request, bid: str, api: Api):
    only_query(request)
    return JSONResponse(await run_in_threadpool(api.cancel, bid))
