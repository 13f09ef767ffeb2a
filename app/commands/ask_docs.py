"""`ask --attach FILE` and `ask --docs NAME`: a question about documents, answered as the window does.

The files are read before the model loads, so a file that cannot be used is one line and exit
2 with nothing else done. The turn is planned by app.chat.documents (whole when the documents
fit the context left, else the passages that answer the question, numbered) and recorded by
record_turn: the history keeps the question as typed, the attachments and their texts, and the
reply's sources. A continued conversation keeps drawing on the documents of its path and on its
collections, as in the window. How the documents were given ("whole" or the passages
retrieved) is said on stderr; the numbered sources follow the answer on stdout, or are
`docs` in --json.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field, replace

from app.chat.conversation import LiveConversation
from app.chat.doc_prompt import DocsPlan
from app.chat.documents import attach, plan_turn, room_tokens, token_counter
from app.commands.common import note
from app.docs.extract import Extracted
from app.docs.index import DocsIndex
from app.engine.message import Attachment, MessageBody
from app.history import tree
from app.history.export.common import source_label
from app.history.store import Store


def add_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "documents (given whole when they fit the context, else the passages that answer the question; "
        "the answer is followed by its numbered sources)")
    g.add_argument("--attach", action="append", default=None, metavar="FILE",
                   help="a document to ask about: text, Markdown, code, PDF (its text layer), DOCX or HTML; "
                        "repeat it for more. It stays with the conversation for --continue")
    g.add_argument("--docs", action="append", default=None, metavar="NAME",
                   help="search collection NAME (indexed by `llamadesk docs add DIR --name NAME`); repeat "
                        "it or give NAME,NAME for more. A continued conversation keeps its own")


@dataclass
class DocsTurn:
    """What the question brings: its new files (read), the collections to search, and once the
    model is open, the plan."""

    attachments: list[tuple[Attachment, Extracted]] = field(default_factory=list)
    collections: list[str] = field(default_factory=list)
    plan: DocsPlan | None = None
    saved_collections: list[str] | None = None  # given by --docs: saved with the conversation


def read(args: argparse.Namespace) -> None:
    """--attach and --docs checked before anything loads (kept on `args` for the turn): a file
    that cannot be read, or a collection that is not indexed, is one line."""
    files = getattr(args, "attach", None) or []
    names = [n.strip() for v in getattr(args, "docs", None) or () for n in v.split(",")]
    if any(not n for n in names):
        raise ValueError("--docs: a collection name is empty")
    if (files or names) and args.tool_result is not None:
        raise ValueError("--attach and --docs go with a question; --tool-result answers a tool call")
    turn = DocsTurn()
    seen: set[str] = set()
    for f in files:
        att, ex = attach(f)  # DocumentError: one line naming the file
        if att.sha256 not in seen:
            seen.add(att.sha256)
            turn.attachments.append((att, ex))
    if names:
        with DocsIndex.open() as index:
            have = [c.name for c in index.collections()]
        missing = [n for n in dict.fromkeys(names) if n not in have]
        if missing:
            listed = ", ".join(have) or "none yet"
            raise ValueError(f"--docs {missing[0]}: there is no such collection (indexed: {listed}; add one "
                             "with llamadesk docs add DIR --name NAME)")
        turn.collections = turn.saved_collections = list(dict.fromkeys(names))
    args.docs_turn = turn


def plan(args: argparse.Namespace, engine, store: Store | None, history: list[MessageBody],
         system: str | None, settings) -> None:
    """The question's documents (its own, its conversation's path's, the collections) planned into
    the prompt, or nothing when there are none; says how they were given."""
    turn: DocsTurn | None = getattr(args, "docs_turn", None)
    if turn is None or args.tool_result is not None:
        return
    live = LiveConversation()
    if args.continue_id is not None and store is not None:
        conv = store.get_conversation(args.continue_id)
        if args.from_id is not None:
            conv.messages = tree.path_to(conv.tree, args.from_id)
        live = LiveConversation.from_store(conv)
        turn.collections = turn.collections or live.collections
    for att, ex in turn.attachments:
        live.keep_document(att.sha256, ex.text, ex.page_starts)
    attached = live.attached([a for a, _ in turn.attachments])
    if not attached and not turn.collections:
        return
    count = token_counter(engine)
    turn.attachments = [(replace(a, tokens=count(ex.text)), ex) for a, ex in turn.attachments]
    room = room_tokens(engine, system, history, args.prompt, settings.max_tokens, count)
    if turn.collections:
        with DocsIndex.open() as index:
            turn.plan = plan_turn(args.prompt, attached, turn.collections, room, count, index)
    else:  # attachments alone: searched in a passing index, nothing left behind
        turn.plan = plan_turn(args.prompt, attached, [], room, count, None)
    use = turn.plan.use
    if use is not None:
        n = len(use.sources)
        how = "whole" if use.mode == "whole" else f"retrieved {n} passage{'s' if n != 1 else ''}"
        note(f"documents: {how} · {use.tokens:,} tokens")


def prompt(args: argparse.Namespace, user_text: str | None) -> str | None:
    """What the engine is given for the question: its documents and it (the words alone are kept)."""
    turn: DocsTurn | None = getattr(args, "docs_turn", None)
    if user_text is None or turn is None or turn.plan is None:
        return user_text
    return turn.plan.user_text


def turn_fields(args: argparse.Namespace, user_text: str | None) -> dict:
    """record_turn's document arguments for the question (none for a reply after tool results)."""
    turn: DocsTurn | None = getattr(args, "docs_turn", None)
    if user_text is None or turn is None:
        return {}
    return {"docs": turn.plan, "attachments": turn.attachments, "collections": turn.saved_collections}


def json_fields(args: argparse.Namespace) -> dict:
    """--json's `attachments` and `docs` (mode, tokens, the numbered sources)."""
    turn: DocsTurn | None = getattr(args, "docs_turn", None)
    if turn is None or turn.plan is None or turn.plan.use is None:
        return {}
    return {"attachments": [a.to_json() for a, _ in turn.attachments], "docs": turn.plan.use.to_json()}


def print_sources(args: argparse.Namespace) -> None:
    """The numbered sources after the answer, as the window lists them under a reply."""
    turn: DocsTurn | None = getattr(args, "docs_turn", None)
    if turn is None or turn.plan is None or turn.plan.use is None:
        return
    use = turn.plan.use
    sys.stdout.write(f"\nSources ({use.mode}):\n")
    sys.stdout.write("".join(f"{source_label(s)}\n" for s in use.sources))
    sys.stdout.flush()
