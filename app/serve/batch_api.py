"""OpenAI's Batch API, locally: upload a JSONL file, create a batch, poll it, fetch the output.

A batch runs on the server's one engine at batch priority: its requests fill
only the slots online requests leave free. Each result is journaled as it
finishes, with the batch file's own rules (app.batchfile: one record per
custom_id, a half-written last line dropped), so a server killed mid-batch
resumes it on restart, without losing or repeating a result. At the end the
journal is split into the output file (answers) and the error file.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from app.batch.types import RequestDone, SlotResult
from app.batchfile.requests import CHAT_URL, BatchInputError, read_input
from app.batchfile.results import ResultWriter, read_journal
from app.engine.sampling import GenerationSettings
from app.serve.api import read_json
from app.serve.batch_store import BatchStore, batch_object, file_object
from app.serve.engine_host import ServeEngine
from app.serve.openai_params import ApiError, bad

log = logging.getLogger("llamadesk.serve.batch")
MAX_FILE = 200 * 1024 * 1024


class BatchRun:
    """One batch on its own thread: validate, decode at batch priority, journal, split."""

    def __init__(self, store: BatchStore, host: ServeEngine, model_id: str, bid: str,
                 defaults: GenerationSettings):
        self.store, self.host, self.model_id, self.bid, self.defaults = store, host, model_id, bid, defaults
        self.pending: dict[str, str] = {}  # host id -> custom_id
        self.lock = threading.Lock()
        self.all_done = threading.Event()
        self.cancelled = False
        self.thread = threading.Thread(target=self._run, name=f"llamadesk-{bid}", daemon=True)

    def start(self) -> BatchRun:
        self.thread.start()
        return self

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            ids = list(self.pending)
        for rid in ids:
            self.host.cancel(rid)
        if not ids:
            self.all_done.set()

    def left(self) -> int:
        with self.lock:
            return len(self.pending)

    def _run(self) -> None:
        try:
            self._decode()
        except Exception as e:  # noqa: BLE001 - a batch fails alone, in its own record
            log.exception("batch %s failed", self.bid)
            self.store.update(self.bid, status="failed", failed_at=int(time.time()),
                              errors=json.dumps({"object": "list", "data": [
                                  {"code": "internal_error", "message": f"{type(e).__name__}: {e}"}]}))

    def _decode(self) -> None:
        b = self.store.batch(self.bid)
        f = self.store.file(b["input_file_id"])
        try:
            items = read_input(f["path"], self.defaults)
        except BatchInputError as e:
            self.store.update(self.bid, status="failed", failed_at=int(time.time()), errors=json.dumps(
                {"object": "list", "data": [{"code": "invalid_file", "message": str(e), "line": None}]}))
            return
        journal_path = self.store.journal_path(self.bid)
        journal = read_journal(journal_path)
        todo = [it for it in items if not journal.has(it)]
        if b["status"] == "validating":
            self.store.update(self.bid, status="in_progress", in_progress_at=int(time.time()),
                              total=len(items))
        if b["status"] == "cancelling":
            self.cancelled = True
            todo = []
        writer = ResultWriter(journal_path, self.model_id)
        try:
            for it in todo:
                if it.error is not None:
                    writer.write_error(it)
                    self.store.count(self.bid, False)
            reqs = [it.request for it in todo if it.request is not None]
            ids = [r.custom_id for r in reqs]

            def sink(ev) -> None:
                if not isinstance(ev, RequestDone):
                    return
                res: SlotResult = ev.result
                with self.lock:
                    cid = self.pending.pop(res.custom_id, None)
                    empty = not self.pending
                if cid is not None and res.stats.stop_reason != "cancelled":
                    writer.write(replace(res, custom_id=cid))  # journaled before it is counted
                    self.store.count(self.bid, res.stats.error is None)
                if empty:
                    self.all_done.set()

            with self.lock:
                if reqs and not self.cancelled:
                    hosted = self.host.submit_batch(reqs, sink)
                    self.pending.update(zip(hosted, ids))
                else:
                    self.all_done.set()
            self.all_done.wait()
        finally:
            writer.close()
        self._finalize()

    def _finalize(self) -> None:
        """Split the journal into OpenAI's output and error files."""
        now = int(time.time())
        if not self.cancelled:
            self.store.update(self.bid, status="finalizing", finalizing_at=now)
        out, err = [], []
        path = self.store.journal_path(self.bid)
        for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else ():
            rec = json.loads(line)
            rec.pop("llamadesk", None)
            (err if rec.get("error") else out).append(json.dumps(rec, ensure_ascii=False))
        fields = {}
        if out:
            fields["output_file_id"] = self.store.add_file("batch_output", f"{self.bid}_output.jsonl",
                                                           ("\n".join(out) + "\n").encode())["id"]
        if err:
            fields["error_file_id"] = self.store.add_file("batch_output", f"{self.bid}_error.jsonl",
                                                          ("\n".join(err) + "\n").encode())["id"]
        if self.cancelled:
            self.store.update(self.bid, status="cancelled", cancelled_at=int(time.time()), **fields)
        else:
            self.store.update(self.bid, status="completed", completed_at=int(time.time()), **fields)


def add_batch_api(app: FastAPI, host: ServeEngine, model_id: str, data_dir: Path, metrics,
                  defaults: GenerationSettings) -> None:
    store = BatchStore(Path(data_dir))
    runs: dict[str, BatchRun] = {}
    app.state.batch_store, app.state.batch_runs = store, runs

    def start(bid: str) -> None:
        runs[bid] = BatchRun(store, host, model_id, bid, defaults).start()

    for b in store.unfinished():  # a server killed mid-batch picks up where it was
        log.info("resuming %s (%s)", b["id"], b["status"])
        start(b["id"])

    def counts() -> tuple[int, int]:
        live = [r for r in runs.values() if r.thread.is_alive()]
        return len(live), sum(r.left() for r in live)
    metrics.batch_counts = counts

    def found(what: str, ident: str) -> dict:
        """The file or batch `ident`, or the 404 OpenAI answers for one that is not there."""
        row = store.file(ident) if what == "file" else store.batch(ident)
        if row is None:
            raise ApiError(404, f"No such {what}: {ident}", "id", "not_found")
        return row

    @app.post("/v1/files")
    async def upload(request: Request):
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > MAX_FILE:
            raise ApiError(413, f"the file is over {MAX_FILE} bytes", "file", "file_too_large")
        form = await request.form(max_part_size=MAX_FILE)
        purpose, up = form.get("purpose"), form.get("file")
        if purpose != "batch":
            raise bad("purpose", "purpose must be 'batch' (the only files this server keeps)")
        if up is None or isinstance(up, str):
            raise bad("file", "a file upload is required (multipart field 'file')")
        data = await up.read()
        if not data.strip():
            raise bad("file", "the file is empty")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("file", "the file is not UTF-8 JSONL") from None
        return file_object(store.add_file("batch", up.filename or "upload.jsonl", data))

    @app.get("/v1/files")
    async def list_files():
        return {"object": "list", "data": [file_object(f) for f in store.files()]}

    @app.get("/v1/files/{fid}")
    async def get_file(fid: str):
        return file_object(found("file", fid))

    @app.get("/v1/files/{fid}/content")
    async def file_content(fid: str):
        return Response(Path(found("file", fid)["path"]).read_bytes(), media_type="application/jsonl")

    @app.post("/v1/batches")
    async def create(request: Request):
        body = await read_json(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object", None, "invalid_json")
        fid, endpoint, window = body.get("input_file_id"), body.get("endpoint"), body.get("completion_window")
        if not isinstance(fid, str) or store.file(fid) is None:
            raise ApiError(404 if isinstance(fid, str) else 400, f"No such file: {fid!r}", "input_file_id",
                           "not_found" if isinstance(fid, str) else "invalid_value")
        if endpoint != CHAT_URL:
            raise bad("endpoint", f"endpoint must be {CHAT_URL} (the one the batch files use here)")
        if window != "24h":
            raise bad("completion_window", "completion_window must be '24h'")
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise bad("metadata", "metadata must be an object")
        b = store.add_batch(fid, endpoint, window, meta)
        start(b["id"])
        return JSONResponse(batch_object(store.batch(b["id"])))

    @app.get("/v1/batches")
    async def list_batches(limit: int = 20):
        items = [batch_object(b) for b in store.batches()[:max(1, min(limit, 100))]]
        return {"object": "list", "data": items, "has_more": False,
                "first_id": items[0]["id"] if items else None, "last_id": items[-1]["id"] if items else None}

    @app.get("/v1/batches/{bid}")
    async def get_batch(bid: str):
        return batch_object(found("batch", bid))

    @app.post("/v1/batches/{bid}/cancel")
    async def cancel(bid: str):
        b = found("batch", bid)
        if b["status"] in ("validating", "in_progress"):
            store.update(bid, status="cancelling", cancelling_at=int(time.time()))
            run = runs.get(bid)
            if run is not None:
                run.cancel()
        return batch_object(store.batch(bid))
