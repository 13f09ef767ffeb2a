"""/v1/files: the Batch API's input files in, its output files out.

An upload can be 200 MB, and the event loop it would stall carries every
token of every open stream. So an upload is spooled to disk as it arrives,
checked and stored in a worker thread, and a file's content is streamed from
disk; the store's SQLite is reached from a worker thread too.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import Annotated, BinaryIO

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.serve.batch_store import BatchStore
from app.serve.http import ApiError, bad, not_found, read_form
from app.serve.protocol import file_list, file_object

MAX_FILE = 200 * 1024 * 1024
PIECE = 1024 * 1024
router = APIRouter()


async def _store(request: Request) -> BatchStore:
    return request.app.state.batch_store


Store = Annotated[BatchStore, Depends(_store)]


def _checked(src: BinaryIO) -> Iterator[bytes]:
    """The upload in pieces, refused on the way unless it is UTF-8 with something in it. In pieces
    so the worker thread lets go of the GIL between them, and 200 MB are never in memory."""
    utf8, blank = codecs.getincrementaldecoder("utf-8")(), True
    while piece := src.read(PIECE):
        try:
            utf8.decode(piece)
        except UnicodeDecodeError:
            raise bad("file", "the file is not UTF-8 JSONL") from None
        blank = blank and piece.isspace()
        yield piece
    if blank:
        raise bad("file", "the file is empty")
    try:
        utf8.decode(b"", final=True)
    except UnicodeDecodeError:
        raise bad("file", "the file is not UTF-8 JSONL") from None


def _keep(store: BatchStore, up: UploadFile) -> dict:
    """A worker thread: the spooled upload checked and copied into the store."""
    return store.add_file("batch", up.filename or "upload.jsonl", _checked(up.file))


async def _found(store: BatchStore, fid: str) -> dict:
    row = await run_in_threadpool(store.file, fid)
    if row is None:
        raise not_found("file", fid)
    return row


@router.post("/v1/files")
async def upload(request: Request, store: Store):
    too_large = ApiError(413, f"the file is over {MAX_FILE} bytes", "file", "file_too_large")
    form = await read_form(request, MAX_FILE, too_large)
    try:
        purpose, up = form.get("purpose"), form.get("file")
        if purpose != "batch":
            raise bad("purpose", "purpose must be 'batch' (the only files this server keeps)")
        if up is None or isinstance(up, str):
            raise bad("file", "a file upload is required (multipart field 'file')")
        row = await run_in_threadpool(_keep, store, up)
    finally:
        await form.close()
    return JSONResponse(file_object(row))


@router.get("/v1/files")
async def list_files(store: Store):
    return JSONResponse(file_list(await run_in_threadpool(store.files)))


@router.get("/v1/files/{fid}")
async def get_file(fid: str, store: Store):
    return JSONResponse(file_object(await _found(store, fid)))


@router.get("/v1/files/{fid}/content")
async def file_content(fid: str, store: Store):
    return FileResponse((await _found(store, fid))["path"], media_type="application/jsonl")
