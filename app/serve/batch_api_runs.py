"""The Batch API's batches at work: one thread per batch, feeding the server's one engine.

A batch runs at batch priority: its requests fill only the slots online
requests leave free. Each result is journaled as it finishes, with the batch
file's own rules (app.batch_jsonl: one record per custom_id, a half-written last
line dropped), so a server killed mid-batch resumes it on restart without
losing or repeating a result. At the end the journal is split into the output
file (answers) and the error file. Nothing here runs on the event loop.

Nothing here writes on the engine's thread either: a result is handed to the
batch's own thread, which journals it. A disk that fills or fails under a
batch then fails that batch, not the engine every online client needs: its
requests still queued are cancelled, it ends "failed" with the reason in its
errors, and if even that cannot be recorded yet, the batch's thread keeps
trying while the listing shows it failed, until the disk takes the write.

Every line submitted gets exactly one record, whatever the engine answers: a
reply that failed while decoding (its text cut short) is an error record, and
so is a request the engine ended without being asked to. Only a server that is
stopping leaves a line without one, and the batch unfinished, for the next
start to resume. A line asking for n choices is n slot requests answered in
one record, built by the online endpoint's own code, logprobs included.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import queue
import threading
import time
import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path

from app.batch_jsonl.api_file import read_api_file
from app.batch_jsonl.requests import INVALID_URL, BatchInputError, InputItem, refusal
from app.batch_jsonl.results import BatchOutputError, ResultWriter, read_journal
from app.engine.errors import EngineError
from app.engine.logprobs import Pieces
from app.engine.sampling import GenerationSettings
from app.errors import LlamaDeskError
from app.openai_compat.embeddings import URL as EMBEDDINGS_URL
from app.openai_compat.embeddings import embedding_body, parse_embedding
from app.openai_compat.refusal import RequestError
from app.openai_compat.tools import ToolCalls
from app.serve import logprob_shapes, protocol
from app.serve.batch_api_lines import Line, choices, ended_unasked, failure
from app.serve.batch_api_store import BatchStore, StoreBug, StoreError, reason
from app.serve.batch_hosts import Hosts
from app.serve.engine_host import ServeEngine
from app.serve.protocol import batch_errors
from app.serve.reasoning import ServedThinking
from app.slots.types import RequestDone, SlotResult, SlotStats

log = logging.getLogger("llamadesk.serve.batch")
RETRY_S = (0.5, 1, 2, 5)  # waits between tries to record a failure, the last one repeated
ENGINE_CHECK_S = 1.0  # how often a batch waiting on results looks whether the engine's thread lives
LISTED_ERRORS = 100  # a batch failing validation lists at most this many lines in its errors
_END = None  # on the results queue: every request submitted has ended


class WriteFailed(Exception):
    """The data folder refused a write of this batch: the batch fails with this line."""


class BatchRun:
    """One batch on its own thread: validate, decode at batch priority, journal, split."""

    def __init__(self, store: BatchStore, hosts: Hosts, bid: str, defaults: GenerationSettings,
                 split: bool = True):
        """`split`: a thinking model's replies have their reasoning apart (--reasoning-format)."""
        self.store, self.hosts, self.bid, self.defaults = store, hosts, bid, defaults
        self.split = split
        self.host: ServeEngine | None = None  # while its model is held
        self.model_id = ""
        self.pending: dict[str, tuple[str, int]] = {}  # host id -> (custom_id, choice)
        self.lock = threading.Lock()
        self.results: queue.Queue[tuple[tuple[str, int], SlotResult] | None] = queue.Queue()
        self.left_for_resume = False  # the server stopped under it: the next start finishes it
        self.cancelled = False
        self.failure: dict | None = None  # the fields of a failure not recorded in the store yet
        self.thread = threading.Thread(target=self._run, name=f"llamadesk-{bid}", daemon=True)

    def start(self) -> BatchRun:
        self.thread.start()
        return self

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            ids = list(self.pending)
            host = self.host
        for rid in ids:
            if host is not None:
                host.cancel(rid)

    def left(self) -> int:
        with self.lock:
            return len(self.pending)

    def _run(self) -> None:
        try:
            self._decode()
        except (WriteFailed, StoreError, OSError) as e:
            self._fail("write_failed", f"the server could not write this batch's results ({_line(e)}); "
                                       "free space in its data folder and create the batch again")
        except StoreBug as e:  # the store has logged its traceback
            self._fail("internal_error", _line(e))
        except Exception as e:
            log.exception("batch %s failed", self.bid)
            self._fail("internal_error", f"{type(e).__name__}: {e}")

    def _decode(self) -> None:
        b = self.store.batch(self.bid)
        f = self.store.file(b["input_file_id"])
        try:
            self.model_id = self.hosts.batch_model(f["path"])
            items = read_api_file(f["path"], self.defaults, self.model_id, b["endpoint"])
            journal = read_journal(self.store.journal_path(self.bid))
        except (BatchInputError, BatchOutputError) as e:
            self._fail("invalid_file", str(e))
            return
        mismatched = [it for it in items if it.code == INVALID_URL]
        if mismatched:
            self._fail_validation(mismatched, "url")
            return
        todo = [it for it in items if not journal.has(it)]
        if b["status"] == "validating":
            self.store.update(self.bid, status="in_progress", in_progress_at=int(time.time()),
                              total=len(items))
        if b["status"] == "cancelling":
            self.cancelled = True
            todo = []
        writer = ResultWriter(self.store.journal_path(self.bid), self.model_id)
        try:
            for it in todo:
                if it.error is not None:
                    writer.write_error(it)
                    self.store.count(self.bid, False)
            if b["endpoint"] == EMBEDDINGS_URL:
                if not self._embed(writer, [it for it in todo if it.embed is not None]):
                    return
            elif not self._generate(writer, [it for it in todo if it.request is not None]):
                return
        finally:
            with contextlib.suppress(OSError):  # every record was flushed and synced as written
                writer.close()
        self._finalize()

    def _generate(self, writer: ResultWriter, items: list[InputItem]) -> bool:
        """Decode the chat lines at batch priority, journaling each as it ends; False if the
        batch failed (its model could not be held) or is left for the next start to finish."""
        host = None
        if items and not self.cancelled:
            try:
                host = self.hosts.hold(self.model_id)
            except LlamaDeskError as e:
                self._fail("model_unavailable", str(e))
                return False
        try:
            lines: dict[str, Line] = {}
            if host is not None:
                lines = self._refuse_ids(writer, items, host.model.llm.n_vocab())
            with self.lock:
                self.host = host
                if host is not None and lines and not self.cancelled:
                    thinking = ServedThinking(host.model, self.split)
                    reqs = [thinking.batch(r) for ln in lines.values() for r in choices(ln.item)]
                    owners = [(ln.item.custom_id, j) for ln in lines.values() for j in range(ln.item.n)]
                    hosted = host.submit_batch(reqs, self._on_event)
                    for rid, owner in zip(hosted, owners, strict=True):
                        lines[owner[0]].rids.append(rid)
                    self.pending.update(zip(hosted, owners, strict=True))
                else:
                    self.results.put(_END)
            if host is not None and lines:
                self._journal(writer, host, lines)
        finally:
            if host is not None:
                with self.lock:
                    self.host = None
                self.hosts.release(self.model_id)
        return not self.left_for_resume

    def _refuse_ids(self, writer: ResultWriter, items: list[InputItem], n_vocab: int) -> dict[str, Line]:
        """The lines to decode, after refusing those the online endpoint refuses once it knows
        the model: a logit_bias naming a token past its vocabulary, in the same words."""
        lines: dict[str, Line] = {}
        for it in items:
            assert it.request is not None  # only chat lines with a request come here
            bad = next((t for t, _ in it.request.settings.logit_bias if t >= n_vocab), None)
            if bad is None:
                lines[it.custom_id] = Line(it)
                continue
            it.error = refusal(it.line, RequestError(
                400, f"logit_bias names token {bad}; this model's vocabulary has {n_vocab}", "logit_bias"))
            writer.write_error(it)
            self.store.count(self.bid, False)
        return lines

    def _embed(self, writer: ResultWriter, items: list[InputItem]) -> bool:
        """Embed the lines one at a time on the model's side thread (online embeddings queue
        between them), each checked as the online endpoint checks it; False if the batch failed."""
        if not items or self.cancelled:
            return True
        try:
            self.hosts.hold(self.model_id)
        except LlamaDeskError as e:
            self._fail("model_unavailable", str(e))
            return False
        try:
            side = self.hosts.side(self.model_id)
            with self.lock:
                self.pending.update((it.custom_id, (it.custom_id, 0)) for it in items)
            for it in items:
                if self.cancelled:
                    break
                t0 = time.perf_counter()
                try:
                    req = parse_embedding(it.embed, self.model_id, side.facts)
                    vectors, used = side.call(partial(side.embed_request, req))
                except RequestError as e:
                    it.error = refusal(it.line, e)
                    writer.write_error(it)
                except EngineError as e:
                    st = SlotStats(stop_reason="error", error=str(e), error_kind="embedding_failed")
                    writer.write(SlotResult(it.custom_id, "", st, it.line))
                else:
                    body = embedding_body(vectors, req.fmt, self.model_id, used)
                    writer.write_answer(it.custom_id, it.line, body, time.perf_counter() - t0)
                self.store.count(self.bid, it.error is None)
                with self.lock:
                    self.pending.pop(it.custom_id, None)
        finally:
            with self.lock:
                self.pending.clear()
            self.hosts.release(self.model_id)
        return True

    def _journal(self, writer: ResultWriter, host: ServeEngine, lines: dict[str, Line]) -> None:
        """Write each line's record once its choices have ended, until every request has. A
        failed write stops the rest (cancelled at the engine at once) and fails the batch."""
        failed: BaseException | None = None
        pieces = Pieces(host.model.llm) if any(ln.item.logprobs for ln in lines.values()) else None
        while True:
            try:
                got = self.results.get(timeout=ENGINE_CHECK_S)
            except queue.Empty:
                if host.thread.is_alive():
                    continue
                got = self._engine_gone()
            if got is _END:
                break
            (cid, choice), res = got
            ln = lines[cid]
            if ln.recorded:
                continue  # a choice of a line already answered or failed
            if res.stats.stop_reason == "cancelled":
                if self.cancelled or failed is not None:
                    continue
                if host.stopping:  # the server is going down: this line runs again at the next start
                    ln.recorded = self.left_for_resume = True
                    continue
                res = ended_unasked(res)
            ln.done[choice] = res
            err = failure(res)
            if err is None and len(ln.done) < ln.item.n:
                continue
            ln.recorded = True
            if err is not None:  # a failed choice fails its line, as it fails an online request
                for rid in ln.rids:
                    host.cancel(rid)
            if failed is not None:
                continue
            try:
                if err is not None:
                    writer.write(replace(res, custom_id=cid, stats=err, line=ln.item.line))
                else:
                    writer.write_response(cid, self._body(ln, pieces), {**ln.done[0].stats.to_json(),
                                                                        "line": ln.item.line})
                self.store.count(self.bid, err is None)
            except (OSError, StoreError) as e:
                failed = e
                log.warning("batch %s: a result could not be written (%s); stopping it", self.bid, _line(e))
                self.cancel()
        if failed is not None:
            raise WriteFailed(_line(failed))

    def _engine_gone(self) -> tuple[tuple[str, int], SlotResult] | None:
        """The engine's thread ended with requests of this batch still queued, which nothing will
        end now: they end here as the engine ends what it stops under it, "cancelled"."""
        with self.lock:
            gone = list(self.pending.items())
            self.pending.clear()
        for rid, owner in gone:
            self.results.put((owner, SlotResult(rid, "", SlotStats(stop_reason="cancelled"))))
        self.results.put(_END)
        return self.results.get()

    def _body(self, ln: Line, pieces: Pieces | None) -> dict:
        """The line's answer, built as the online endpoint builds it: its n choices in order, each
        with its logprobs when asked, the prompt counted once."""
        answers = []
        for j in range(ln.item.n):
            res = ln.done[j]
            st = res.stats
            lp = None
            if ln.item.logprobs and pieces is not None:
                counted = res.logprobs[:st.completion_tokens or 0]
                shown = logprob_shapes.Visible(pieces, True).take(
                    counted, logprob_shapes.shown_bytes(res.text, res.reasoning))
                lp = logprob_shapes.chat(shown, pieces)
            answers.append(protocol.Answer(res.text, st, lp, j == 0, res.reasoning))
        assert ln.item.request is not None  # a line in flight has its request
        tools = ln.item.request.reply_as if isinstance(ln.item.request.reply_as, ToolCalls) else None
        ident = protocol.completion_id("chat", uuid.uuid4().hex[:24])
        return dict(protocol.completion("chat", ident, self.model_id, answers, tools))

    def _on_event(self, ev) -> None:
        """The engine thread: a finished request is handed to the batch's thread, nothing more."""
        if not isinstance(ev, RequestDone):
            return
        res: SlotResult = ev.result
        with self.lock:
            owner = self.pending.pop(res.custom_id, None)
            empty = not self.pending
        if owner is None:
            return
        self.results.put((owner, res))
        if empty:
            self.results.put(_END)

    def _finalize(self) -> None:
        """Split the journal into OpenAI's output and error files."""
        if not self.cancelled:
            self.store.update(self.bid, status="finalizing", finalizing_at=int(time.time()))
        fields = _split(self.store, self.bid)  # the counts too: what the files hold, however it went
        if self.cancelled:
            self.store.update(self.bid, status="cancelled", cancelled_at=int(time.time()), **fields)
        else:
            self.store.update(self.bid, status="completed", completed_at=int(time.time()), **fields)

    def _fail_validation(self, items: list[InputItem], param: str) -> None:
        """Fail the batch before any line runs, each offending line listed with its number and the
        field at fault, as OpenAI's validation lists them."""
        more = len(items) - LISTED_ERRORS
        listed = [{"code": it.code or "invalid_request", "param": param, "line": it.line,
                   "message": (it.error or "") + (f" ({more} more lines like it are not listed)"
                                                  if more > 0 and k == LISTED_ERRORS - 1 else "")}
                  for k, it in enumerate(items[:LISTED_ERRORS])]
        first = items[0]
        self._fail(first.code or "invalid_request", f"validation failed on {len(items)} of its lines, the "
                   f"first: {first.error}", {"object": "list", "data": listed})

    def _fail(self, code: str, message: str, errors: dict | None = None) -> None:
        """End the batch as failed, saying why; a store that cannot take it yet is tried again
        and one with a bug is not (the listing shows `failure` meanwhile either way), so the batch
        is never left looking alive."""
        log.warning("batch %s failed: %s", self.bid, message)
        fields = {"status": "failed", "failed_at": int(time.time()),
                  "errors": errors or batch_errors({"code": code, "message": message, "line": None})}
        self.failure = fields
        for attempt in itertools.count():
            try:
                self.store.update(self.bid, **fields)
            except StoreError as e:
                if attempt == 0:
                    log.warning("batch %s: its failure cannot be recorded yet (%s); retrying", self.bid,
                                _line(e))
                time.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
                continue
            except StoreBug:  # retrying a bug repeats it; the listing keeps showing `failure`
                log.error("batch %s: its failure cannot be recorded (a store bug, logged above)", self.bid)
                return
            self.failure = None
            return


def _split(store: BatchStore, bid: str) -> dict:
    """The journal as OpenAI's output file (answers) and error file; their ids and the counts of
    each, for the batch."""
    out: list[str] = []
    err: list[str] = []
    path = store.journal_path(bid)
    # At "\n" only: str.splitlines() also cuts at U+2028 and U+0085, which an answer may hold raw.
    for line in path.read_text(encoding="utf-8").split("\n") if path.exists() else ():
        if not line:
            continue
        rec = json.loads(line)
        rec.pop("llamadesk", None)
        (err if rec.get("error") else out).append(json.dumps(rec, ensure_ascii=False))
    fields = {"completed": len(out), "failed": len(err)}
    for key, recs, name in (("output_file_id", out, "output"), ("error_file_id", err, "error")):
        if recs:
            data = ("\n".join(recs) + "\n").encode()
            fields[key] = store.add_file("batch_output", f"{bid}_{name}.jsonl", data)["id"]
    return fields


def _line(e: BaseException) -> str:
    return str(e) if isinstance(e, StoreError | WriteFailed) else reason(e)


class BatchRuns:
    """Every batch started since the server did, by id: what cancel reaches and /metrics counts.
    Started from worker threads and counted from the event loop, hence the lock."""

    def __init__(self, store: BatchStore, hosts: Hosts, defaults: GenerationSettings, split: bool = True):
        self.store, self.hosts, self.defaults, self.split = store, hosts, defaults, split
        self._runs: dict[str, BatchRun] = {}
        self._lock = threading.Lock()

    def check(self, path: str | Path) -> None:
        """ValueError when a batch of this input file cannot run on this server's models."""
        self.hosts.check(path)

    def start(self, bid: str) -> None:
        run = BatchRun(self.store, self.hosts, bid, self.defaults, self.split)
        with self._lock:
            self._runs[bid] = run
        run.start()

    def resume(self) -> None:
        """A server killed mid-batch picks up where it was. On a data folder it cannot write, a
        batch cannot go on (not one result could be kept): it is shown failed with that reason and
        left as it is on disk, for a start on a writable folder to resume."""
        for b in self.store.unfinished():
            if self.store.read_only is None:
                log.info("resuming %s (%s)", b["id"], b["status"])
                self.start(b["id"])
                continue
            log.warning("%s cannot be resumed: %s", b["id"], self.store.read_only)
            run = BatchRun(self.store, self.hosts, b["id"], self.defaults, self.split)
            run.failure = {"status": "failed", "failed_at": int(time.time()), "errors": batch_errors({
                "code": "storage_unavailable", "line": None,
                "message": f"{self.store.read_only}: this batch cannot go on; it resumes where it was when "
                           "the server is started with a writable data folder"})}
            with self._lock:
                self._runs[b["id"]] = run

    def cancel(self, bid: str) -> None:
        with self._lock:
            run = self._runs.get(bid)
        if run is not None:
            run.cancel()

    def shown(self, row: dict) -> dict:
        """A batch's row as the API shows it: with a failure its thread could not record yet."""
        with self._lock:
            run = self._runs.get(row["id"])
        failure = run.failure if run is not None else None
        return {**row, **failure} if failure else row

    def counts(self) -> tuple[int, int]:
        """(batches running, their requests not finished yet)."""
        with self._lock:
            live = [r for r in self._runs.values() if r.thread.is_alive() and r.failure is None]
        return len(live), sum(r.left() for r in live)
