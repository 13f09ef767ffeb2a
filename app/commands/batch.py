"""`llamadesk batch`: a file of prompts decoded together, results journaled as JSONL.

The decode runs on a worker thread so Ctrl+C on the main thread can cancel
it cleanly: finished results are already flushed to the output, and the
next run with the same arguments resumes from them.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

from app.batch_jsonl.job import BatchJob, JobSummary
from app.commands.common import (
    add_endpoint_args,
    add_model_args,
    add_sampling_args,
    check_range,
    endpoint_from_args,
    load_options,
    note,
    sampling,
)
from app.remote.endpoint import Endpoint
from app.slots.context import MAX_SEQ, MAX_TOTAL_CTX, MIN_SLOT_CTX
from app.slots.engine import DEFAULT_SLOT_CTX, DEFAULT_SLOTS, ONLINE_RESERVE, BatchEngine
from app.slots.types import BatchProgress

MAX_PARALLEL = MAX_SEQ - ONLINE_RESERVE  # one sequence stays free for chat turns
MAX_REMOTE_PARALLEL = 256  # app.remote.slot_backend's bound: more in flight only queues on the server


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "batch", help="decode a file of prompts together (OpenAI Batch JSONL or one prompt per line)",
        description="Decode every request of INPUT (OpenAI Batch API JSONL, or plain text with one "
                    "prompt per line) with continuous batching, appending OpenAI batch output "
                    "records to OUTPUT as each finishes. Re-running skips custom_ids already in "
                    "OUTPUT.")
    p.add_argument("input", metavar="INPUT", help="requests: .jsonl (OpenAI Batch format) or text")
    p.add_argument("-o", "--output", required=True, metavar="OUTPUT.jsonl", help="results (appended)")
    p.add_argument("--parallel", type=int, default=DEFAULT_SLOTS, metavar="N",
                   help=f"sequences decoded together, 1 to {MAX_PARALLEL} (default {DEFAULT_SLOTS}); with "
                        f"--endpoint, requests in flight at once, 1 to {MAX_REMOTE_PARALLEL}")
    p.add_argument("--quiet", action="store_true", help="no progress line, only the summary")
    add_model_args(p, ctx=DEFAULT_SLOT_CTX, ctx_help="context length of each slot")
    add_endpoint_args(p)
    add_sampling_args(p, max_tokens=256)
    return p


def _fmt_eta(s: float | None) -> str:
    if s is None:
        return "--:--"
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class _ProgressLine:
    """One rewritten line on a terminal; a plain line every 5 s when stderr is a file."""

    def __init__(self, offset_done: int, offset_total: int):
        self.tty = sys.stderr.isatty()
        self.offset_done, self.offset_total = offset_done, offset_total
        self.last = 0.0
        self.shown = False

    def __call__(self, ev) -> None:
        if not isinstance(ev, BatchProgress):
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 5.0:
            return
        self.last = now
        done, total = ev.done + self.offset_done, ev.total + self.offset_total
        width = 24
        fill = int(width * done / total) if total else width
        rate = ev.tok_s or ev.avg_tok_s
        line = (f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total} · "
                f"{rate or 0:.0f} tok/s · slots {ev.busy_slots}/{ev.n_slots} · ETA {_fmt_eta(ev.eta_s)}")
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.shown = True

    def end(self) -> None:
        if self.tty and self.shown:
            sys.stderr.write("\n")


def check_slots(args: argparse.Namespace) -> None:
    """--parallel and --ctx as typed, before anything loads: BatchContext would
    see --parallel plus the reserved chat sequence, a number the user never typed."""
    check_range("--parallel", args.parallel, 1, MAX_PARALLEL)
    check_range("--ctx", args.ctx, MIN_SLOT_CTX)
    total = (args.parallel + ONLINE_RESERVE) * args.ctx
    if total > MAX_TOTAL_CTX:
        raise ValueError(f"--parallel {args.parallel} with --ctx {args.ctx} needs {total} tokens of "
                         f"context (the chat slot included); the most is {MAX_TOTAL_CTX}")


def check_model_ctx(args: argparse.Namespace, path) -> None:
    """A slot longer than the model was trained for decodes nothing useful, and
    its cache can be more memory than the machine has (the kernel then kills
    the process without a word), so refuse it from the file's header."""
    from app.engine.gguf import read_header

    trained = read_header(path).context_length
    if trained and args.ctx > trained:
        raise ValueError(f"--ctx {args.ctx} is longer than the model's training context ({trained} tokens)")


def run(args: argparse.Namespace) -> int:
    from app.engine.loader import load_model
    from app.engine.models import resolve_model

    endpoint = endpoint_from_args(args)
    if endpoint is not None:
        check_range("--parallel", args.parallel, 1, MAX_REMOTE_PARALLEL)
    else:
        check_slots(args)
    defaults = sampling(args)
    opts = load_options(args)
    job = BatchJob(args.input, args.output, defaults)  # bad input: one line, exit 2, before loading
    if not job.todo:
        note(f"all {len(job.items)} requests are already in {args.output}; nothing to do")
        return 0
    if endpoint is not None:
        return _run_remote(args, job, endpoint)
    slot_ctx, opts.n_ctx = opts.n_ctx, 256  # the chat context is unused here: keep it small
    path = resolve_model(args.model)
    check_model_ctx(args, path)
    model = load_model(path, opts)
    try:
        if model.report.fallback:
            note(model.report.fallback)
        engine = BatchEngine(model, args.parallel, slot_ctx)
        if engine.notice:
            note(engine.notice)
        return _finish(job, engine, model.header.name or model.report.model_path, args)
    finally:
        model.close()


def _run_remote(args: argparse.Namespace, job: BatchJob, endpoint: Endpoint) -> int:
    """The same job, journal and summary, with the server doing the batching."""
    from app.chat.remote_engine import RemoteChatEngine
    from app.remote.slot_backend import RemoteBatchEngine

    chat = RemoteChatEngine(endpoint, args.remote_model, notice=note, prompt_format=args.remote_format)
    try:
        note(f"runs on {chat.report.runs_on}, {args.parallel} requests at a time")
        engine = RemoteBatchEngine(chat.http, endpoint, chat.info, chat.remote_model.id, args.parallel,
                                   args.remote_format)
        return _finish(job, engine, chat.remote_model.id, args)
    finally:
        chat.close()


def _finish(job: BatchJob, engine, model_name: str, args: argparse.Namespace) -> int:
    pre_errors = sum(1 for it in job.todo if it.error is not None)
    progress = None if args.quiet else _ProgressLine(pre_errors, pre_errors)
    box, interrupted = _decode_on_worker(job, engine, model_name, progress)
    if progress:
        progress.end()
    engine.free()
    if "error" in box:
        raise box["error"]
    s: JobSummary = box["summary"]
    print(_summary(s, args), file=sys.stderr)
    if interrupted:
        note(f"interrupted: finished results are in {args.output}; run the same command to resume")
        return 130
    return 0


def _decode_on_worker(job: BatchJob, engine: BatchEngine, model_name: str,
                      progress: _ProgressLine | None) -> tuple[dict, bool]:
    """Run the job on a worker thread so Ctrl+C here can cancel it; returns
    ({"summary": ...} or {"error": ...}, whether Ctrl+C was pressed)."""
    box: dict = {}
    ended = threading.Event()

    def work():
        try:
            box["summary"] = job.run(engine, model_name, progress)
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = e
        finally:
            ended.set()

    threading.Thread(target=work, name="llamadesk-batch", daemon=True).start()
    interrupted = False
    # Wait on an Event, not Thread.join: a join interrupted by Ctrl+C can leave
    # is_alive() False while the thread still runs (CPython < 3.13), and freeing
    # the model under a running llama_decode crashes. Ctrl+C may land anywhere here.
    while not ended.is_set():
        try:
            while not ended.wait(0.1):
                pass
        except KeyboardInterrupt:
            interrupted = True
            engine.cancel()
    return box, interrupted


def _summary(s: JobSummary, args) -> str:
    rate = f"{s.tok_s:.1f} tok/s" if s.tok_s else "-"
    parts = [f"batch: {s.ok} ok", f"{s.errors} errors"]
    if s.skipped:
        parts.append(f"{s.skipped} skipped (already done)")
    if s.cancelled or s.not_started:
        parts.append(f"{s.cancelled + s.not_started} left for a rerun")
    parts += [f"{s.generated} tokens in {s.wall_s:.1f} s ({rate})", f"{args.parallel} slots",
              f"-> {args.output}"]
    return " · ".join(parts)
