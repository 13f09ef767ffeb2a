"""`llamadesk ask`: one question, answered headlessly by the window's engine.

The exchange is recorded in the same history as the window's (unless
--no-save), through the same `record_turn`, so `--continue ID` sends the
model exactly the prompt the window would and a crash mid-reply leaves the
partial reply behind, marked interrupted. A continued conversation keeps the
reply format the window chose for it (its replies stay JSON to its schema)
unless --schema, --json-object or --grammar ask for another.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

from app.chat.engines import open_engine
from app.chat.recorder import TurnRecorder, record_turn
from app.chat.reply import Reply
from app.chat.reply_format import ReplyFormat, ReplyFormatError
from app.commands.common import (
    add_endpoint_args,
    add_model_args,
    add_sampling_args,
    endpoint_from_args,
    engine_target,
    note,
    sampling,
)
from app.engine.control import CancelToken
from app.engine.errors import GenerationError
from app.engine.events import TextDelta
from app.engine.grammar import Constraint, compile_grammar
from app.history.store import Store
from app.remote.endpoint import Endpoint
from app.remote.errors import RemoteError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("ask", help="answer one prompt on the command line",
                       description="Stream the answer to PROMPT on stdout; stats go to stderr.")
    p.add_argument("prompt", help="the message to send")
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt")
    p.add_argument("--no-stream", action="store_true", help="print the reply only when it is complete")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object {"text", "model", "stats", "conversation"} on stdout')
    p.add_argument("--continue", dest="continue_id", type=int, default=None, metavar="ID",
                   help="continue conversation ID (see `llamadesk list`) with its history and system prompt")
    p.add_argument("--no-save", action="store_true", help="do not record this exchange in the history")
    g = p.add_argument_group("reply format (the reply is held to it while it is decoded)")
    fmt = g.add_mutually_exclusive_group()
    fmt.add_argument("--schema", metavar="FILE|JSON", help="a JSON schema the reply must be valid against: "
                                                           "a file, or the schema itself")
    fmt.add_argument("--json-object", action="store_true", help="any JSON object")
    fmt.add_argument("--grammar", metavar="FILE", help="a GBNF grammar the reply must match")
    add_model_args(p)
    add_endpoint_args(p)
    add_sampling_args(p)
    p.add_argument("--speculative", choices=("off", "ngram", "draft"), default=None,
                   help="ngram: guess the next tokens from the conversation's own text and check "
                        "them in one pass (pays on rewrites, fixes and edits); draft: guess with "
                        "--draft-model. Either steps aside by itself when it does not pay. A local "
                        "--model only")
    p.add_argument("--draft-model", metavar="FILE",
                   help="a smaller GGUF with the model's vocabulary that guesses for it (implies "
                        "--speculative draft)")
    return p


def generate_interruptibly(work):
    """Run work(cancel) on a thread so Ctrl+C cancels it and keeps the partial reply.

    We wait on an Event the worker sets last, not on Thread.join: before
    CPython 3.13 a join interrupted by Ctrl+C can report a still-running
    thread as finished, and the model would then be freed under a decode.
    """
    cancel = CancelToken()
    box: dict = {}
    finished = threading.Event()

    def target():
        try:
            box["result"] = work(cancel)
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = e
        finally:
            finished.set()

    threading.Thread(target=target, name="llamadesk-ask", daemon=True).start()
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            cancel.cancel()
    if "error" in box:
        raise box["error"]
    return box["result"]


def reply_constraint(args: argparse.Namespace) -> Constraint | None:
    """--schema, --json-object or --grammar as a constraint, compiled now: one that cannot be
    enforced is refused before the model loads."""
    if args.json_object:
        c = Constraint.any_json()
    elif args.schema is not None:
        text = args.schema.strip()
        if not text.startswith(("{", "true", "false")):
            text = _read(args.schema, "--schema")
        try:
            schema = json.loads(text)
        except ValueError as e:
            raise ValueError(f"--schema {args.schema}: not a JSON schema ({e})") from None
        if not isinstance(schema, dict | bool):
            raise ValueError(f"--schema {args.schema}: a JSON schema is an object")
        c = Constraint.json_schema(schema)
    elif args.grammar is not None:
        c = Constraint("gbnf", _read(args.grammar, "--grammar"))
    else:
        return None
    compile_grammar(c)
    return c


def _stored_constraint(stored: dict | None) -> Constraint | None:
    """The constraint of a continued conversation's reply format; one that cannot be used now is
    said, and the reply is free text (as the window opens such a conversation)."""
    try:
        return ReplyFormat.from_json(stored).constraint()
    except ReplyFormatError as e:
        note(f"the conversation's reply format cannot be used ({e}); the reply is text")
        return None


def _read(path: str, flag: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{flag} {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None


def run(args: argparse.Namespace) -> int:
    if not args.prompt.strip():
        raise ValueError("the prompt is empty")
    spec = args.speculative or ("draft" if args.draft_model else "off")
    if spec == "draft" and not args.draft_model:
        raise ValueError("--speculative draft needs --draft-model FILE")
    if args.draft_model and spec != "draft":
        raise ValueError(f"--draft-model guesses with --speculative draft, not {spec}")
    settings = replace(sampling(args), constraint=reply_constraint(args),
                       speculative=None if spec == "off" else spec)
    endpoint = endpoint_from_args(args)  # a bad URL or key is refused before anything opens
    if endpoint is not None and (settings.speculative or args.draft_model):
        raise ValueError("--speculative and --draft-model decode a local --model; a server "
                         "(--endpoint) decides its own decoding")
    store = None
    if not args.no_save or args.continue_id is not None:
        store = Store.open()  # before the model: a history problem is reported in no time
        if store.notice:
            note(store.notice)
    try:
        return _ask(args, settings, store, endpoint)
    finally:
        if store is not None:
            store.close()


def _ask(args: argparse.Namespace, settings, store: Store | None, endpoint: Endpoint | None) -> int:
    history, system = [], args.system
    if args.continue_id is not None:
        conv = store.get_conversation(args.continue_id)  # fails early for a wrong id
        history = conv.history()[0]
        system = conv.system_prompt if system is None else system
        if settings.constraint is None:
            settings = replace(settings, constraint=_stored_constraint(conv.reply_format))
    target = engine_target(args, endpoint)
    if args.draft_model:
        target = replace(target, draft_model=args.draft_model)
    engine = open_engine(target, notice=note)
    try:
        report = engine.report
        if report.fallback:
            note(report.fallback)
        elif report.backend != "CPU":  # a GPU build or a server: where it ran is news either way
            note(f"runs on {report.runs_on}")
        if engine.notice and not args.json:
            note(engine.notice)
        for line in engine.notes:
            note(line)
        streaming = not (args.no_stream or args.json)

        def on_event(ev):
            if streaming and isinstance(ev, TextDelta):
                sys.stdout.write(ev.text)
                sys.stdout.flush()

        conv_id = None
        if args.no_save:
            reply: Reply = generate_interruptibly(
                lambda cancel: engine.reply(history, args.prompt, settings, system, on_event, cancel))
        else:
            turn = generate_interruptibly(
                lambda cancel: record_turn(TurnRecorder(store), engine, args.continue_id, args.prompt,
                                           settings, args.system, on_event, cancel))
            reply = turn.reply
            conv_id = turn.conversation_id if turn.state else None
        if args.json:
            json.dump({"text": reply.text, "model": report.model_path, "runs_on": report.runs_on,
                       "stats": reply.stats.to_json(),
                       "conversation": conv_id},
                      sys.stdout, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            if not streaming:
                sys.stdout.write(reply.text)
            sys.stdout.write("\n")
            sys.stdout.flush()
            print(reply.stats.summary(), file=sys.stderr)
            if conv_id is not None:
                note(f"saved as conversation {conv_id} (continue it with --continue {conv_id})")
        if reply.stats.error is not None:
            # The text so far was shown and is kept (interrupted); the failure is one line.
            if endpoint is not None:
                raise RemoteError(endpoint.base_url, f"the reply stopped: {reply.stats.error}")
            raise GenerationError(f"the reply stopped: {reply.stats.error}")
        return 0
    finally:
        engine.close()
