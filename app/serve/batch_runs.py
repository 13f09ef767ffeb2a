"""The Batch API's batches at work: one thread per batch, feeding the server's one engine.

A batch runs at batch priority: its requests fill only the slots online
requests leave free. Each result is journaled as it finishes, with the batch
file's own rules (app.batchfile: one record per custom_id, a half-written last
line dropped), so a server killed mid-batch resumes it on restart without
losing or repeating a result. At the end the journal is split into the output
file (answers) and the error file. Nothing here runs on the event loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace

from app.batch.types import RequestDone, SlotResult
from app.batchfile.requests import BatchInputError, read_input
from app.batchfile.results import ResultWriter, read_journal
from app.engine.sampling import GenerationSettings
from app.serve.batch_store import BatchStore
from app.serve.engine_host import ServeEngine
from app.serve.protocol import batch_errors

log = logging.getLogger("llamadesk.serve.batch")


class BatchRun:
    """One batch on its own thread: validate, decode at batch priority, journal, split."""

    def __init__(self, store: BatchStore, host: ServeEngine, model_id: str, bid: str,
                 defaults: GenerationSettings):
        self.store, self.host, self.model_id, self.bid, self.defaults = store, host, model_id, bid, defaults
        self.pending: dict[str, str] = {}  # host id -> custom_id
        self.lock = threading.Lock()
        self.all_done = threading.Event()
        self.cancelled = False
        self.writer: ResultWriter | None = None
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
        except Exception as e:
            log.exception("batch %s failed", self.bid)
            self.store.update(self.bid, status="failed", failed_at=int(time.time()), errors=batch_errors(
                {"code": "internal_error", "message": f"{type(e).__name__}: {e}"}))

    def _decode(self) -> None:
        b = self.store.batch(self.bid)
        f = self.store.file(b["input_file_id"])
        try:
            items = read_input(f["path"], self.defaults)
        except BatchInputError as e:
            self.store.update(self.bid, status="failed", failed_at=int(time.time()), errors=batch_errors(
                {"code": "invalid_file", "message": str(e), "line": None}))
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
        self.writer = ResultWriter(journal_path, self.model_id)
        try:
            for it in todo:
                if it.error is not None:
                    self.writer.write_error(it)
                    self.store.count(self.bid, False)
            reqs = [it.request for it in todo if it.request is not None]
            ids = [r.custom_id for r in reqs]
            with self.lock:
                if reqs and not self.cancelled:
                    hosted = self.host.submit_batch(reqs, self._on_event)
                    self.pending.update(zip(hosted, ids))
                else:
                    self.all_done.set()
            self.all_done.wait()
        finally:
            self.writer.close()
        self._finalize()

    def _on_event(self, ev) -> None:
        """The engine thread: a finished request is journaled, then counted."""
        if not isinstance(ev, RequestDone):
            return
        res: SlotResult = ev.result
        with self.lock:
            cid = self.pending.pop(res.custom_id, None)
            empty = not self.pending
        if cid is not None and res.stats.stop_reason != "cancelled":
            self.writer.write(replace(res, custom_id=cid))
            self.store.count(self.bid, res.stats.error is None)
        if empty:
            self.all_done.set()

    def _finalize(self) -> None:
        """Split the journal into OpenAI's output and error files."""
        now = int(time.time())
        if not self.cancelled:
            self.store.update(self.bid, status="finalizing", finalizing_at=now)
        out: list[str] = []
        err: list[str] = []
        path = self.store.journal_path(self.bid)
        # At "\n" only: str.splitlines() also cuts at U+2028 and U+0085, which an answer may hold raw.
        for line in path.read_text(encoding="utf-8").split("\n") if path.exists() else ():
            if not line:
                continue
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


class BatchRuns:
    """Every batch started since the server did, by id: what cancel reaches and /metrics counts.
    Started from worker threads and counted from the event loop, hence the lock."""

    def __init__(self, store: BatchStore, host: ServeEngine, model_id: str, defaults: GenerationSettings):
        self.store, self.host, self.model_id, self.defaults = store, host, model_id, defaults
        self._runs: dict[str, BatchRun] = {}
        self._lock = threading.Lock()

    def start(self, bid: str) -> None:
        run = BatchRun(self.store, self.host, self.model_id, bid, self.defaults)
        with self._lock:
            self._runs[bid] = run
        run.start()

    def resume(self) -> None:
        """A server killed mid-batch picks up where it was."""
        for b in self.store.unfinished():
            log.info("resuming %s (%s)", b["id"], b["status"])
            self.start(b["id"])

    def cancel(self, bid: str) -> None:
        with self._lock:
            run = self._runs.get(bid)
        if run is not None:
            run.cancel()

    def counts(self) -> tuple[int, int]:
        """(batches running, their requests not finished yet)."""
        with self._lock:
            live = [r for r in self._runs.values() if r.thread.is_alive()]
        return len(live), sum(r.left() for r in live)
