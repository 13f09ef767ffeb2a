"""/v1/batches: OpenAI's Batch API (create, list, retrieve, cancel) on the server's own engine.

The routes are thin async shells; what they do reads and writes SQLite or
starts a batch's thread, so it is a method of `Batches`, run in a worker
thread, off the event loop that every online token goes through.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.batchfile.requests import CHAT_URL
from app.serve.batch_runs import BatchRuns
from app.serve.batch_store import BatchStore
from app.serve.http import ApiError, bad, not_found, read_json
from app.serve.protocol import BatchList, BatchObject, batch_list, batch_object

router = APIRouter()


class Batches:
    """The Batch API's state: the store and the batches running. Every method blocks."""

    def __init__(self, store: BatchStore, runs: BatchRuns):
        self.store, self.runs = store, runs

    def _found(self, bid: str) -> dict:
        row = self.store.batch(bid)
        if row is None:
            raise not_found("batch", bid)
        return row

    def create(self, body) -> BatchObject:
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
        fid, endpoint, window = body.get("input_file_id"), body.get("endpoint"), body.get("completion_window")
        if not isinstance(fid, str) or self.store.file(fid) is None:
            raise ApiError(404 if isinstance(fid, str) else 400, f"No such file: {fid!r}", "input_file_id",
                           "not_found" if isinstance(fid, str) else "invalid_value")
        if endpoint != CHAT_URL:
            raise bad("endpoint", f"endpoint must be {CHAT_URL} (the one the batch files use here)")
        if window != "24h":
            raise bad("completion_window", "completion_window must be '24h'")
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise bad("metadata", "metadata must be an object")
        bid = self.store.add_batch(fid, endpoint, window, meta)["id"]
        self.runs.start(bid)
        return batch_object(self._found(bid))

    def listing(self, limit: int) -> BatchList:
        return batch_list(self.store.batches()[:max(1, min(limit, 100))])

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
    body = await read_json(request)
    return JSONResponse(await run_in_threadpool(api.create, body))


@router.get("/v1/batches")
async def list_batches(api: Api, limit: int = 20):
    return JSONResponse(await run_in_threadpool(api.listing, limit))


@router.get("/v1/batches/{bid}")
async def get_batch(bid: str, api: Api):
    return JSONResponse(await run_in_threadpool(api.get, bid))


@router.post("/v1/batches/{bid}/cancel")
async def cancel(bid: str, api: Api):
    return JSONResponse(await run_in_threadpool(api.cancel, bid))
