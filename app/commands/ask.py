"""`llamadesk ask`: one question, answered headlessly by the window's engine."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from app.chat.session import ChatEngine, Reply
from app.commands.common import add_model_args, add_sampling_args, load_options, note, sampling
from app.engine.decoder import CancelToken
from app.engine.events import TextDelta


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("ask", help="answer one prompt on the command line",
                       description="Stream the answer to PROMPT on stdout; stats go to stderr.")
    p.add_argument("prompt", help="the message to send")
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt")
    p.add_argument("--no-stream", action="store_true", help="print the reply only when it is complete")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object {"text", "model", "stats"} on stdout')
    add_model_args(p)
    add_sampling_args(p)
    return p


def generate_interruptibly(work):
    """Run work(cancel) on a thread so Ctrl+C cancels it and keeps the partial reply."""
    cancel = CancelToken()
    box: dict = {}

    def target():
        try:
            box["result"] = work(cancel)
        except BaseException as e:  # re-raised on the main thread
            box["error"] = e

    t = threading.Thread(target=target, name="llamadesk-ask", daemon=True)
    t.start()
    while t.is_alive():
        try:
            t.join(0.1)
        except KeyboardInterrupt:
            cancel.cancel()
    if "error" in box:
        raise box["error"]
    return box["result"]


def run(args: argparse.Namespace) -> int:
    if not args.prompt.strip():
        raise ValueError("the prompt is empty")
    settings = sampling(args)
    engine = ChatEngine.open(args.model, load_options(args))
    try:
        report = engine.model.report
        if report.fallback:
            note(report.fallback)
        if engine.notice and not args.json:
            note(engine.notice)
        streaming = not (args.no_stream or args.json)

        def on_event(ev):
            if streaming and isinstance(ev, TextDelta):
                sys.stdout.write(ev.text)
                sys.stdout.flush()

        reply: Reply = generate_interruptibly(
            lambda cancel: engine.reply([], args.prompt, settings, args.system, on_event, cancel))
        if args.json:
            json.dump({"text": reply.text, "model": report.model_path, "stats": reply.stats.to_json()},
                      sys.stdout, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            if not streaming:
                sys.stdout.write(reply.text)
            sys.stdout.write("\n")
            sys.stdout.flush()
            print(reply.stats.summary(), file=sys.stderr)
        return 0
    finally:
        engine.close()
