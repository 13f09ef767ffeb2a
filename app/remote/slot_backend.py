"""A batch run on a remote server: N requests in flight, the server's own batching does the rest.

llama-server's slots, vLLM's continuous batching and Ollama's parallel
requests batch concurrent requests on the GPU; the client's job is only to
keep N of them in flight. This is how a batch file scales past one machine.
It has BatchEngine's interface (submit_many, run, cancel, on_event), so
BatchJob journals, resumes and reports exactly as for a local run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import httpx

from app.engine.control import CancelToken
from app.engine.prompt import TranscriptFormat
from app.engine.stats import ReplyStats
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, RemoteError
from app.remote.server import ServerInfo
from app.remote.stream import request_for, stream_reply
from app.slots.types import BatchEvent, BatchProgress, RequestDone, SlotRequest, SlotResult, SlotStats

MAX_REMOTE_PARALLEL = 256
PROGRESS_EVERY_S = 0.25


class RemoteBatchEngine:
    def __init__(self, http: httpx.Client, endpoint: Endpoint, info: ServerInfo, model: str, parallel: int,
                 prompt_format: str = "chat", on_event: Callable[[BatchEvent], None] | None = None):
        self.http, self.endpoint, self.info, self.model = http, endpoint, info, model
        self.parallel = parallel
        self.format = TranscriptFormat() if prompt_format == "transcript" else None
        self.notice: str | None = None
        self.on_event = on_event
        self._cancel = CancelToken()
        self._running = threading.Event()  # cleared while paused: no new request starts
        self._running.set()
        self._queue: list[SlotRequest] = []
        self._lock = threading.Lock()
        self._owned: httpx.Client | None = None

    @classmethod
    def connect(cls, endpoint: Endpoint, model: str | None, parallel: int, prompt_format: str = "chat",
                on_event: Callable[[BatchEvent], None] | None = None) -> RemoteBatchEngine:
        """Its own client and probe (the Batch window's thread builds one); free() closes it."""
        from app.remote.server import probe
        from app.remote.transport import client

        http = client(endpoint)
        try:
            info = probe(http, endpoint)
            eng = cls(http, endpoint, info, info.model(model).id, parallel, prompt_format, on_event)
        except BaseException:
            http.close()
            raise
        eng._owned = http
        return eng

    def submit_many(self, reqs: Iterable[SlotRequest]) -> None:
        self._queue.extend(reqs)

    def cancel(self) -> None:
        self._cancel.cancel()
        self._running.set()  # a paused batch wakes to see the cancel

    def cancel_request(self, custom_id: str) -> None:
        """BatchEngine's interface; a remote batch serves no chat turns, so there is none to stop."""

    def pause(self) -> None:
        """Requests already sent run to the end (the server has them); no new one starts."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def free(self) -> None:
        """The server owns the model; only a client this engine opened itself is closed."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def _one(self, req: SlotRequest, t0: float, state: dict) -> SlotResult:
        self._running.wait()
        queued = time.perf_counter() - t0
        with self._lock:
            state["busy"] += 1
        try:
            if self._cancel.is_set():
                return SlotResult(req.custom_id, "", SlotStats(stop_reason="cancelled"), req.line,
                                  req.reply_as)
            if req.prompt_tokens is not None:
                raise RemoteError(self.endpoint.base_url, "a pre-tokenized prompt cannot be sent to a server")
            path, body = request_for(self.info.kind, self.model, req.messages, req.settings, self.format)
            text, st, _thinking = stream_reply(self.http, self.endpoint, self.info, path, body,
                                               cancel=self._cancel)
            return SlotResult(req.custom_id, text.strip() if self.format else text,
                              _batch_stats(st, queued), req.line, req.reply_as)
        except (RemoteError, EndpointConfigError) as e:
            reason = e.reason if isinstance(e, RemoteError) else str(e)
            failed = SlotStats(stop_reason="error", error=reason, error_kind="remote_error",
                               queued_at=queued)
            return SlotResult(req.custom_id, "", failed, req.line, req.reply_as)
        finally:
            with self._lock:
                state["busy"] -= 1

    def run(self) -> list[SlotResult]:
        reqs, self._queue = self._queue, []
        t0 = time.perf_counter()
        state = {"busy": 0}
        results: list[SlotResult] = []
        recent: deque = deque()
        done_ev = threading.Event()

        def finished(res: SlotResult) -> None:
            with self._lock:
                results.append(res)
                recent.append((time.perf_counter(), res.stats.completion_tokens or 0))
            self._emit(RequestDone(res))

        ticker = threading.Thread(target=self._tick, args=(t0, reqs, results, recent, state, done_ev),
                                  name="llamadesk-remote-batch-progress", daemon=True)
        ticker.start()
        try:
            with ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="llamadesk-remote") as pool:
                for fut in [pool.submit(self._one, r, t0, state) for r in reqs]:
                    fut.add_done_callback(lambda f: finished(f.result()))
        finally:
            done_ev.set()
            ticker.join()
        self._progress(t0, reqs, results, recent, state)
        return results

    def _tick(self, t0, reqs, results, recent, state, done_ev) -> None:
        while not done_ev.wait(PROGRESS_EVERY_S):
            self._progress(t0, reqs, results, recent, state)

    def _progress(self, t0, reqs, results, recent, state) -> None:
        now = time.perf_counter()
        with self._lock:
            done = len(results)
            failed = sum(1 for r in results if r.stats.error is not None)
            generated = sum(r.stats.completion_tokens or 0 for r in results)
            while recent and now - recent[0][0] > 5.0:
                recent.popleft()
            window = sum(n for _, n in recent)
            busy = state["busy"]
        elapsed = now - t0
        avg = generated / elapsed if elapsed > 0 and generated else None
        left = len(reqs) - done
        eta = left * elapsed / done if done else None
        self._emit(BatchProgress(done=done, failed=failed, total=len(reqs), queued=max(0, left - busy),
                                 busy_slots=busy, n_slots=self.parallel, generated=generated,
                                 elapsed_s=elapsed, tok_s=window / 5.0 if window else None, avg_tok_s=avg,
                                 eta_s=eta, paused=not self._running.is_set()))

    def _emit(self, ev: BatchEvent) -> None:
        if self.on_event is not None:
            self.on_event(ev)


def _batch_stats(st: ReplyStats, queued: float) -> SlotStats:
    """One remote reply as a batch output record; a count the server did not report is null."""
    stop = st.stop_reason if st.error is None else "error"
    return SlotStats(prompt_tokens=st.prompt_tokens, completion_tokens=st.decode_tokens,
                      stop_reason=stop, queued_at=queued, ttft_from_queue_s=st.ttft_s, total_s=st.total_s,
                      decode_tok_s=st.wall_decode_tok_s, error=st.error,
                      error_kind="remote_error" if st.error else None)
