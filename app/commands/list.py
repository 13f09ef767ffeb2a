"""`llamadesk list`: the conversations in the shared history (the window's too).

`list ID` lists one conversation's messages on the path shown, each with its
id (what `ask --continue ID --from MESSAGE_ID` branches from); `list ID --tree`
draws every branch: an edited question or a regenerated reply beside the one
it replaced, `(2/3)` for its place among them, `*` on the path shown. A chain
of messages stays in one column and only a branch indents, so a long
conversation reads down the page rather than off its right edge.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from app.commands.common import note
from app.history import timestamps, transcript
from app.history.export.common import snippet
from app.history.records import COMPLETE, StoredConversation, StoredMessage
from app.history.store import Store


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list saved conversations, or one conversation's messages",
                       description="List saved conversations, most recently active first; with ID, "
                                   "that conversation's messages and their ids.")
    p.add_argument("id", nargs="?", type=int, default=None, metavar="ID",
                   help="list this conversation's messages (the path shown) with their ids")
    p.add_argument("--tree", action="store_true",
                   help="with ID: every branch, drawn as a tree (* marks the path shown, (2/3) a "
                        "message's place among its alternatives)")
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("--search", metavar="TEXT", help="only conversations with a message containing TEXT")
    p.add_argument("--reasoning", action="store_true",
                   help="with --search: look in thinking models' reasoning too, not only in what "
                        "the messages say")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="show at most N")
    return p


def _iso(ts) -> str | None:
    """null for a stored time no clock produced: one bad row must not stop the list."""
    t = timestamps.utc(ts)
    return t.isoformat(timespec="seconds") if t is not None else None


def run(args: argparse.Namespace) -> int:
    if args.id is not None:
        return _one(args)
    if args.tree:
        raise ValueError("--tree draws one conversation: give its ID (llamadesk list ID --tree)")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    if args.reasoning and args.search is None:
        raise ValueError("--reasoning widens a search: give --search TEXT with it")
    with Store.open(writable=False) as store:  # listing needs no writes: a read-only folder is fine
        if store.notice:
            note(store.notice)
        convs = store.list_conversations()
        if args.search is not None:
            hits = store.search(args.search, limit=10_000, include_reasoning=args.reasoning)
            hit = {h.conversation_id for h in hits}
            convs = [c for c in convs if c.id in hit]
    convs = convs[: args.limit] if args.limit else convs
    if not convs and not args.json:
        print("no conversations" + (" match" if args.search is not None else " yet"), file=sys.stderr)
        return 0
    return write_stdout(lambda: _print(convs, args.json))


def _print(convs, as_json: bool) -> None:
    if as_json:
        json.dump([{"id": c.id, "title": c.title, "message_count": c.message_count,
                    "created_at": _iso(c.created_at), "updated_at": _iso(c.updated_at), "model": c.model}
                   for c in convs], sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    width = max(len(str(c.id)) for c in convs)
    for c in convs:
        updated = timestamps.shown(c.updated_at, "%Y-%m-%d %H:%M")
        print(f"{c.id:>{width}}  {updated:<16}  {c.message_count:>5} msgs  {_one_line(c.title)}")


def _one(args: argparse.Namespace) -> int:
    if args.search is not None or args.limit is not None:
        raise ValueError("--search and --limit choose among conversations; with ID, give neither")
    if args.reasoning:
        raise ValueError("--reasoning widens --search, which chooses among conversations: "
                         "with ID, leave it out")
    with Store.open(writable=False) as store:
        if store.notice:
            note(store.notice)
        conv = store.get_conversation(args.id)
    return write_stdout(lambda: _print_messages(conv, args.tree, args.json))


def _print_messages(conv: StoredConversation, whole: bool, as_json: bool) -> None:
    rows, parents = transcript.written_tree(conv)  # the tree, parents first (a bent one made whole)
    kids: dict[int | None, list[StoredMessage]] = {}
    for m, p in zip(rows, parents, strict=True):
        kids.setdefault(p, []).append(m)
    place = {m.id: (k + 1, len(group)) for group in kids.values() for k, m in enumerate(group)}
    parent = {m.id: p for m, p in zip(rows, parents, strict=True)}
    on_path = {m.id for m in conv.messages}
    if as_json:
        listed = [m for m in rows if m.id in on_path] if not whole else rows
        json.dump([{"id": m.id, "parent_id": parent[m.id], "role": m.role, "content": m.content,
                    "state": m.state, "edited": m.edited, "created_at": _iso(m.created_at),
                    "on_path": m.id in on_path, "version": list(place[m.id]) if place[m.id][1] > 1 else None,
                    **({"reasoning": m.reasoning} if m.reasoning else {}),
                    **({"attachments": [a.to_json() for a in m.attachments]} if m.attachments else {}),
                    **({"docs": m.docs.to_json()} if m.docs is not None else {})}
                   for m in listed], sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    if not rows:
        print(f"conversation {conv.id} has no messages yet", file=sys.stderr)
        return
    width = max(len(str(m.id)) for m in rows)
    branches = sum(1 for m in rows if m.id not in kids)
    print(f"Conversation {conv.id}: {_one_line(conv.title)} · " + (
        f"{len(rows)} messages on {branches} branches · * the path shown" if branches > 1 and whole
        else f"{len(conv.messages)} messages shown" + (f" ({len(rows)} on {branches} branches: --tree "
                                                       "draws them)" if branches > 1 else "")))

    def line(m: StoredMessage, prefix: str) -> str:
        n, of = place[m.id]
        extra = [f"{n}/{of}"] if of > 1 else []
        extra += ["edited"] if m.edited else []
        extra += [m.state] if m.state != COMPLETE else []
        tail = f"  ({', '.join(extra)})" if extra else ""
        mark = ("* " if m.id in on_path else "  ") if whole else ""
        return f"{mark}{prefix}{m.id:>{width}}  {m.role:<9}  {snippet(m, 60)}{tail}"

    if not whole:
        for m in conv.messages:
            print(line(m, ""))
        return
    tee, elbow, bar = _connectors()
    stack: list[tuple[StoredMessage, str, str]] = []

    def branch_out(group: list[StoredMessage], indent: str) -> None:
        """The messages that follow one message, each opening its branch (or one: the chain goes on)."""
        if len(group) == 1:
            stack.append((group[0], indent, indent))
            return
        for k in range(len(group) - 1, -1, -1):
            last = k == len(group) - 1
            stack.append((group[k], indent + (elbow if last else tee), indent + ("   " if last else bar)))

    branch_out(kids.get(None, []), "")
    while stack:  # depth first, oldest first; a chain in one column, a branch one step in
        m, first, indent = stack.pop()
        print(line(m, first))
        below = kids.get(m.id, [])
        if below:
            branch_out(below, indent)


def _connectors() -> tuple[str, str, str]:
    """Box-drawing lines where stdout can write them; ASCII where it cannot (a C locale)."""
    try:
        "├─└│".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "|- ", "`- ", "|  "
    return "├─ ", "└─ ", "│  "


def _one_line(title: str) -> str:
    """An imported title may hold newlines; a row is one line."""
    return " ".join(title.split()) or "(untitled)"


def write_stdout(write) -> int:
    """Run `write` and flush; a reader that stopped early (`| head`) ends it quietly.

    As Python's documentation advises for SIGPIPE: stdout is pointed at devnull,
    so the interpreter's own flush at exit does not fail a second time, and the
    exit status is the one a shell shows for a process ended by SIGPIPE.
    """
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + 13  # SIGPIPE; a literal, as Windows has no signal.SIGPIPE
    return 0
