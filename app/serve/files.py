"""/v1/files: the Batch API's input files in, its output files out.

An upload can be 200 MB, and the event loop it would stall carries every
token of every open stream. So an upload is spooled to disk as it arrives,
checked and stored in a worker thread, and a file's content is streamed from
disk; the store's SQLite is reached from a worker thread too.

An upload is exactly a `purpose` and a `file`: another form field (OpenAI's
`expires_after`, say) is refused, not dropped, since this server would not
honour it. A file whose content went missing from the disk (someone cleaned
the data folder) is a 404 naming it, not a crash in the middle of an answer:
the content is opened before the answer starts, and streamed from that
descriptor.
"""

from __future__ import annotations

import codecs
import os
import unicodedata
from collections.abc import Iterator
from typing import Annotated, BinaryIO

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from app.serve.batch_api_store import BatchStore, reason
from app.serve.http_rules import ApiError, bad, not_found, only_query, page, printable, read_form
from app.serve.protocol import file_list, file_object

MAX_FILE = 200 * 1024 * 1024
PIECE = 1024 * 1024
FORM_FIELDS = ("purpose", "file")
MAX_NAME = 1024  # bytes of a file's name, far past any file system's 255
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


def _upload(form: FormData) -> UploadFile:
    """The one file of an upload with purpose "batch", or the refusal naming the field."""
    for name in form:
        if name not in FORM_FIELDS:
            raise ApiError(400, f"Unrecognized form field: {printable(name)} (an upload here takes "
                                f"{' and '.join(FORM_FIELDS)})", name, "unknown_parameter")
    for name in FORM_FIELDS:
        if len(form.getlist(name)) > 1:
            raise bad(name, f"{name} is given {len(form.getlist(name))} times; an upload takes one")
    purpose, up = form.get("purpose"), form.get("file")
    if purpose != "batch":
        raise bad("purpose", "purpose must be 'batch' (the only files this server keeps)")
    if up is None or isinstance(up, str):
        raise bad("file", "a file upload is required (multipart field 'file')")
    _named(up.filename)
    return up


def _named(name: str | None) -> None:
    """A filename is kept and listed as given; one with a control character in it (a raw client's
    line break, which browsers and httpx send escaped as %0A) would break every line it is shown
    on, so it is refused, saying which character, instead of stored cut or mangled."""
    bad_char = next((c for c in name or "" if unicodedata.category(c) == "Cc"), None)
    if bad_char is not None:
        raise bad("file", f"the file's name {name!r} holds a control character (U+{ord(bad_char):04X}); "
                          "name the file without it")
    if name is not None and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
        raise bad("file", f"the file's name is {len(name.encode('utf-8', 'surrogatepass'))} bytes; "
                          f"at most {MAX_NAME} are kept")


async def _found(store: BatchStore, fid: str) -> dict:
    row = await run_in_threadpool(store.file, fid)
    if row is None:
        raise not_found("file", fid)
    return row


@router.post("/v1/files")
async def upload(request: Request, store: Store):
    only_query(request)
    too_large = ApiError(413, f"the file is over {MAX_FILE} bytes", "file", "file_too_large")
    form = await read_form(request, MAX_FILE, too_large)
    try:
        row = await run_in_threadpool(_keep, store, _upload(form))
    finally:
        await form.close()
    return JSONResponse(file_object(row))


@router.get("/v1/files")
async def list_files(request: Request, store: Store, limit: int = 100, after: str | None = None,
                     purpose: str | None = None, order: str = "desc"):
    only_query(request, "limit", "after", "purpose", "order")
    if order not in ("asc", "desc"):
        raise bad("order", "order must be 'asc' or 'desc'")
    rows = [r for r in await run_in_threadpool(store.files) if purpose is None or r["purpose"] == purpose]
    listed, more = page(rows if order == "desc" else rows[::-1], limit, after, "file")
    return JSONResponse({**file_list(listed), "has_more": more})


@router.get("/v1/files/{fid}")
async def get_file(request: Request, fid: str, store: Store):
    only_query(request)
    return JSONResponse(file_object(await _found(store, fid)))


def _pieces(f: BinaryIO) -> Iterator[bytes]:
    with f:
        while piece := f.read(PIECE):
            yield piece


def _open(path: str, fid: str) -> tuple[BinaryIO, int]:
    try:
        f = open(path, "rb")
    except OSError as e:
        raise ApiError(404, f"the content of {fid} is no longer on the server's disk ({reason(e)})", "id",
                       "not_found") from None
    return f, os.fstat(f.fileno()).st_size


def _delete(store: BatchStore, fid: str) -> dict:
    try:
        row = store.delete_file(fid)
    except ValueError as e:
        raise ApiError(409, str(e), "file_id", "file_in_use") from None
    if row is None:
        raise not_found("file", fid)
    return row


@router.delete("/v1/files/{fid}")
async def delete_file(request: Request, fid: str, store: Store):
    only_query(request)
    row = await run_in_threadpool(_delete, store, fid)
    return JSONResponse({"id": row["id"], "object": "file", "deleted": True})


@router.get("/v1/files/{fid}/content")
async def file_content(request: Request, fid: str, store: Store):
    only_query(request)
    f, size = await run_in_threadpool(_open, (await _found(store, fid))["path"], fid)
    return StreamingResponse(_pieces(f), media_type="application/jsonl",
                             headers={"content-length": str(size)})
