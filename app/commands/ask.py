"""`llamadesk ask`: one question, answered headlessly by the window's engine.

The exchange is recorded in the same history as the window's (unless
--no-save), through the same `record_turn`, so `--continue ID` sends the
model exactly the prompt the window would and a crash mid-reply leaves the
partial reply behind, marked interrupted; Ctrl+C stops the reply, keeps it
marked stopped, and exits 130 as a shell reports an interrupted command (a
script must not take a stopped reply for a whole one). A continued
conversation keeps the reply format the window chose for it (its replies stay
JSON to its schema) unless --schema, --json-object or --grammar ask for
another; likewise its tools, unless --tools or --builtin-tools give others.
With tools the reply may
be tool calls, printed as what they are (the tool, its arguments); built-in
tools run here and the model is asked again with their results
(app.chat.tool_loop), and a declared tool's result is given back with
`--continue ID --tool-result TEXT`. `--preset NAME` starts the question from a
preset saved in the window (app.chat.presets): its system prompt, sampling
settings, reply format and tools, each unless a flag gives its own; like the
window, it sets up a new conversation only, never a continued one.
`--continue ID --from MESSAGE_ID` branches: the question follows that message
(an id from `llamadesk list ID --tree`) with the path up to it as the history,
beside what followed it before, which stays; the path shown is the new branch.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from app.chat.engines import open_engine
from app.chat.presets import SAMPLING, Preset, PresetStore
from app.chat.recorder import TurnRecorder, record_turn
from app.chat.reply import Reply
from app.chat.reply_format import ReplyFormat, ReplyFormatError
from app.chat.tool_loop import Result, follow
from app.chat.tool_set import CHOICES, ToolSet, ToolSetError, declared_tools, make_tool_set, read_tools_text
from app.commands import ask_docs, ask_mcp
from app.commands.ask_output import calls_json, print_replies
from app.commands.common import (
    add_endpoint_args,
    add_model_args,
    add_sampling_args,
    add_speculative_args,
    endpoint_from_args,
    engine_target,
    note,
    sampling,
    speculative_mode,
)
from app.commands.thinking import ThinkingPrinter, add_thinking_args, check_thinking, with_thinking
from app.engine.control import CancelToken
from app.engine.errors import GenerationError
from app.engine.events import TextDelta
from app.engine.grammar import Constraint, compile_grammar
from app.engine.message import MessageBody, ToolCall
from app.history import tree
from app.history.messages import AT_LEAF
from app.history.records import StoredConversation, StoredMessage
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
    p.add_argument("--from", dest="from_id", type=int, default=None, metavar="MESSAGE_ID",
                   help="with --continue: branch from message MESSAGE_ID (see `llamadesk list ID --tree`): "
                        "the question follows it, with the path up to it as the history; what followed "
                        "it before stays as another branch")
    p.add_argument("--no-save", action="store_true", help="do not record this exchange in the history")
    p.add_argument("--preset", metavar="NAME",
                   help="start from a preset saved in the window: its system prompt, sampling settings, "
                        "reply format and tools (a flag given as well wins); not with --continue")
    t = p.add_argument_group(
        "tools (the reply may call them; calls are printed as the tool and its arguments, and with "
        "--json listed in tool_calls; a reply with tools prints once it is whole)")
    t.add_argument("--tools", metavar="FILE|JSON",
                   help="tools you declare: OpenAI function definitions, a file or the JSON itself. The "
                        "model's calls of them are printed; give a call's result back with --continue ID "
                        "--tool-result TEXT")
    t.add_argument("--builtin-tools", action="store_true",
                   help="let the model call LlamaDesk's own tools, calculator and current_time: they run "
                        "here, and the model is asked again with their results until it answers in text")
    t.add_argument("--tool-choice", default=None, metavar="auto|required|none|NAME",
                   help="auto (the model decides; default), required (its first reply must be a call), "
                        "none (no calls), or one tool's name (call that tool)")
    t.add_argument("--tool-result", metavar="TEXT",
                   help="with --continue: the result of the conversation's waiting tool call (PROMPT is "
                        "then ignored, give '-'), and the model answers from it")
    ask_mcp.add_args(t)
    g = p.add_argument_group("reply format (the reply is held to it while it is decoded)")
    fmt = g.add_mutually_exclusive_group()
    fmt.add_argument("--schema", metavar="FILE|JSON", help="a JSON schema the reply must be valid against: "
                                                           "a file, or the schema itself")
    fmt.add_argument("--json-object", action="store_true", help="any JSON object")
    fmt.add_argument("--grammar", metavar="FILE", help="a GBNF grammar the reply must match")
    add_model_args(p)
    add_endpoint_args(p)
    add_sampling_args(p)
    add_thinking_args(p)
    # A sampling flag not given takes the preset's value (--preset), else its usual default.
    p.set_defaults(sampling_defaults={k: p.get_default(k) for k in SAMPLING}, **dict.fromkeys(SAMPLING))
    add_speculative_args(p, "with a local --model only")
    ask_docs.add_args(p)
    return p


def take_preset(args: argparse.Namespace) -> Preset | None:
    """--preset NAME, read from the window's presets file: its system prompt and its sampling
    values fill what the flags left out (the rest take their usual defaults). A preset file with
    presets that cannot be used is said, the preset asked for used if it can be."""
    preset = None
    if getattr(args, "preset", None) is not None:
        if args.continue_id is not None:
            raise ValueError("--preset sets up a new conversation; a continued one keeps its own "
                             "(drop --preset or --continue)")
        load = PresetStore().read()
        if load.message():
            note(load.message())
        preset = load.find(args.preset)
        if preset is None:
            names = ", ".join(f"«{p.name}»" for p in load.presets) or "none saved yet"
            raise ValueError(f"--preset {args.preset}: there is no such preset (saved: {names})")
        if args.system is None:
            args.system = preset.system_prompt or None
    defaults = getattr(args, "sampling_defaults", {})
    for k in SAMPLING:
        if getattr(args, k, None) is None:
            given = preset.sampling.get(k) if preset is not None else None
            setattr(args, k, defaults.get(k) if given is None else given)
    return preset


def generate_interruptibly(work, cancel: CancelToken | None = None):
    """Run work(cancel) on a thread so Ctrl+C cancels it and keeps the partial reply; `cancel`
    given, the caller sees afterwards whether Ctrl+C was pressed (and may share it between
    replies, so one Ctrl+C ends a whole turn of tool rounds).

    We wait on an Event the worker sets last, not on Thread.join: before
    CPython 3.13 a join interrupted by Ctrl+C can report a still-running
    thread as finished, and the model would then be freed under a decode.
    """
    cancel = cancel if cancel is not None else CancelToken()
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


def tool_set_of(args: argparse.Namespace, stored: dict | None) -> ToolSet:
    """--tools, --builtin-tools and --tool-choice as a ToolSet; without them a continued
    conversation's own tools (a stored set that cannot be used is said, and none are used)."""
    mcp = ask_mcp.names(getattr(args, "mcp", None))  # --mcp NAME: servers this question may call
    if args.tools is None and not args.builtin_tools:
        try:
            kept = ToolSet.from_json(stored)
        except ToolSetError as e:
            note(f"the conversation's tools cannot be used ({e}); the reply is text")
            kept = ToolSet()
        mcp = mcp or kept.mcp
        if args.tool_choice is not None and (kept.builtin + kept.declared or mcp):
            return _checked(kept.builtin, kept.declared, args.tool_choice, mcp)
        if args.tool_choice is not None:
            raise ValueError("--tool-choice needs tools: --tools FILE|JSON, --builtin-tools or --mcp NAME")
        return replace(kept, mcp=mcp)
    declared = declared_tools(read_tools_text(args.tools)) if args.tools is not None else ()
    builtin = ("calculator", "current_time") if args.builtin_tools else ()
    return _checked(builtin, declared, args.tool_choice or "auto", mcp)


def _checked(builtin, declared, choice: str, mcp=()) -> ToolSet:
    try:
        return make_tool_set(builtin, declared, choice, mcp)
    except ToolSetError as e:
        raise ValueError(f"--tool-choice/--tools: {e}") from None


def run(args: argparse.Namespace) -> int:
    if args.tool_result is not None and (args.continue_id is None or args.no_save):
        raise ValueError("--tool-result records a waiting call's result in its conversation: use it "
                         "with --continue ID, without --no-save")
    if args.from_id is not None and args.continue_id is None:
        raise ValueError("--from names a message of the conversation --continue ID continues: give both")
    if args.from_id is not None and args.tool_result is not None:
        raise ValueError("--tool-result answers the call waiting at the end of the path shown, --from "
                         "asks a new question elsewhere: give one")
    if args.tool_choice is not None and args.tool_choice not in CHOICES and not args.tool_choice.strip():
        raise ValueError("--tool-choice is empty")
    if args.tool_result is None and not args.prompt.strip():
        raise ValueError("the prompt is empty")
    check_thinking(args)
    ask_docs.read(args)  # a document that cannot be used is refused before anything loads
    preset = take_preset(args)
    settings = replace(sampling(args), constraint=reply_constraint(args), speculative=speculative_mode(args))
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
        with ask_mcp.McpSession(args) as mcp:  # its servers stop when the question is answered
            return _ask(args, settings, store, endpoint, preset, mcp)
    finally:
        if store is not None:
            store.close()


def branch_path(conv: StoredConversation, msg_id: int) -> list[StoredMessage]:
    """The messages up to `msg_id`, the one a branched question follows; a message that is not the
    conversation's, or is a question itself (two questions in a row), is refused in one line."""
    by_id = {m.id: m for m in conv.tree}
    if msg_id not in by_id:
        raise ValueError(f"conversation {conv.id} has no message {msg_id} (its ids: llamadesk list "
                         f"{conv.id} --tree)")
    m = by_id[msg_id]
    if m.role == "user":
        instead = (f"--from {m.parent_id}" if m.parent_id is not None
                   else "a new conversation (drop --continue and --from)")
        raise ValueError(f"message {msg_id} is a question: --from names the message a new question "
                         f"follows; to ask in its place, give {instead}")
    return tree.path_to(conv.tree, msg_id)


def _waiting_call(conv) -> ToolCall:
    """The conversation's last reply's first call that has no result yet."""
    answered = {m.tool_call_id for m in conv.messages if m.role == "tool"}
    last = next((m for m in reversed(conv.messages) if m.role == "assistant"), None)
    waiting = [c for c in (last.tool_calls if last else ()) if c.id not in answered]
    if not waiting:
        raise ValueError(f"conversation {conv.id} has no tool call waiting for a result")
    return waiting[0]


def _ask(args: argparse.Namespace, settings, store: Store | None, endpoint: Endpoint | None,
         preset: Preset | None = None, mcp: ask_mcp.McpSession | None = None) -> int:
    history, system = [], args.system
    stored_tools = preset.tools.to_json() if preset is not None else None
    waiting: ToolCall | None = None
    if args.continue_id is not None:
        conv = store.get_conversation(args.continue_id)  # fails early for a wrong id
        if args.from_id is not None:
            conv.messages = branch_path(conv, args.from_id)  # what the question follows, as history
        history = conv.history()[0]
        system = conv.system_prompt if system is None else system
        stored_tools = conv.tools
        if args.tool_result is not None:
            waiting = _waiting_call(conv)
    tools = tool_set_of(args, stored_tools)
    tools = mcp.resolve(tools) if mcp is not None else tools
    if args.continue_id is not None and settings.constraint is None and not tools.active:
        settings = replace(settings, constraint=_stored_constraint(conv.reply_format))
    if preset is not None and settings.constraint is None and not tools.active:
        settings = replace(settings, constraint=preset.reply_format.constraint())
    if tools.active and settings.constraint is not None:
        raise ValueError("tools hold the reply to the tool format: give --schema, --json-object or "
                         "--grammar without tools")
    settings = with_thinking(settings, args)  # last: a replace() above would drop a copy's extras
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
        # A reply with tools is JSON of the tool format until it is read: printed once it is whole.
        streaming = not (args.no_stream or args.json or tools.active)
        # The thinking goes to stderr as it comes, even where the answer waits to be whole: it is
        # not part of what stdout is held back for. --json carries it instead.
        thinking = ThinkingPrinter(hide=args.hide_thinking or args.json)

        def on_event(ev):
            if not args.no_stream:
                thinking(ev)
            if streaming and isinstance(ev, TextDelta):
                sys.stdout.write(ev.text)
                sys.stdout.flush()

        ask_docs.plan(args, engine, store, history, system, settings)
        done = _answer(args, engine, store, history, system, settings, tools, on_event, waiting,
                       mcp.answer if mcp is not None else None)
        replies, results, left, conv_id = done.replies, done.results, done.waiting, done.conversation
        reply = replies[-1]
        if args.json:
            out = {"text": reply.text, "reasoning": reply.reasoning, "model": report.model_path,
                   "runs_on": report.runs_on, "stats": reply.stats.to_json(), "conversation": conv_id}
            if tools.active or len(replies) > 1 or any(r.tool_calls for r in replies):
                out["tool_calls"] = ask_mcp.with_servers(calls_json(replies, results), tools)
                out["waiting_for"] = [c.name for c in left]
                out["rounds"] = [{"text": r.text, "reasoning": r.reasoning,
                                  "tool_calls": [c.id for c in r.tool_calls],
                                  "stats": r.stats.to_json()} for r in replies]
            out.update(ask_docs.json_fields(args))
            json.dump(out, sys.stdout, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            if not streaming:
                print_replies(replies, results, thinking if args.no_stream else None, tools)
            sys.stdout.write("\n")
            ask_docs.print_sources(args)
            sys.stdout.flush()
            print(reply.stats.summary(), file=sys.stderr)
            if conv_id is not None:
                note(f"saved as conversation {conv_id} (continue it with --continue {conv_id})")
            for c in left if not done.stopped else ():
                note(f"the model called {c.name}, a tool you declared: give its result with "
                     f"--continue {conv_id if conv_id is not None else 'ID'} --tool-result TEXT")
        if done.stopped:
            return 130  # Ctrl+C, as a shell reports it; the reply so far is kept, marked stopped
        if reply.stats.error is not None:
            # The text so far was shown and is kept (interrupted); the failure is one line.
            if endpoint is not None:
                raise RemoteError(endpoint.base_url, f"the reply stopped: {reply.stats.error}")
            raise GenerationError(f"the reply stopped: {reply.stats.error}")
        return 0
    finally:
        engine.close()


@dataclass
class _Answered:
    replies: list[Reply]  # one, or more after built-in tools' results
    results: list[Result]  # the results the model was given
    waiting: list[ToolCall]  # calls of declared tools, left for the user to answer
    conversation: int | None  # where it was saved (None: not saved)
    stopped: bool = False  # Ctrl+C ended the turn


def _answer(args, engine, store: Store | None, history: list[MessageBody], system, settings,
            tools: ToolSet, on_event, waiting: ToolCall | None, mcp=None) -> _Answered:
    """The turn, recorded as the window records one (or, with --no-save, kept in memory). Ctrl+C
    stops the reply under way and ends the turn there: no tool of a stopped reply is run or
    recorded, and the model is not asked again."""
    results: list[Result] = []
    stop = CancelToken()
    asked: list[Reply] = []
    first_round = 1 if waiting is not None else 0  # after a result the model may answer in text
    convo = list(history)
    recorder = TurnRecorder(store) if not args.no_save else None
    saved: list[int | None] = [args.continue_id]
    branch: list[int | None] = [args.from_id if args.from_id is not None else AT_LEAF]

    def ask(user_text: str | None, calls) -> Reply:
        if recorder is None:
            r = generate_interruptibly(lambda cancel: engine.reply(
                convo, ask_docs.prompt(args, user_text), settings, system, on_event, cancel, calls), stop)
            convo.extend([MessageBody("user", user_text)] if user_text is not None else [])
            convo.append(MessageBody("assistant", r.text, r.tool_calls, reasoning=r.reasoning))
            asked.append(r)
            return r
        turn = generate_interruptibly(
            lambda cancel: record_turn(recorder, engine, saved[0], user_text, settings, args.system,
                                       on_event, cancel, tools=calls, tool_set=tools.to_json(),
                                       parent_id=branch[0], **ask_docs.turn_fields(args, user_text)), stop)
        branch[0] = AT_LEAF  # the first question branches; what follows it follows it
        if turn.state:
            saved[0] = turn.conversation_id
        asked.append(turn.reply)
        return turn.reply

    def again(calls) -> Reply:
        if stop.is_set():
            raise _Stopped
        return ask(None, calls)

    def result(call: ToolCall, text: str) -> None:
        if stop.is_set():
            raise _Stopped
        results.append((call, text))
        server = ask_mcp.server_of(tools, call)
        if recorder is None:
            convo.append(MessageBody("tool", text, tool_call_id=call.id, tool_name=call.name,
                                     tool_server=server))
        else:
            recorder.tool_result(saved[0], call, text, server=server)

    if waiting is not None:
        result(waiting, args.tool_result)
    first = ask(args.prompt if waiting is None else None, tools.calls(first_round))
    try:
        replies, left = follow(first, tools, lambda _done, calls: again(calls), on_result=result, mcp=mcp)
    except _Stopped:
        replies, left = asked, []
    return _Answered(replies, results, left, saved[0] if recorder is not None else None, stop.is_set())


class _Stopped(Exception):
    """Ctrl+C between the rounds of a turn with tools."""
