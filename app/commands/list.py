"""`llamadesk list`: the conversations in the shared history (the window's too)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from app.commands.common import note
from app.history import timestamps
from app.history.store import Store


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list saved conversations",
                       description="List saved conversations, most recently active first.")
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("--search", metavar="TEXT", help="only conversations with a message containing TEXT")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="show at most N")
    return p


def _iso(ts) -> str | None:
    """null for a stored time no clock produced: one bad row must not stop the list."""
    t = timestamps.utc(ts)
    return t.isoformat(timespec="seconds") if t is not None else None


def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    with Store.open(writable=False) as store:  # listing needs no writes: a read-only folder is fine
        if store.notice:
            note(store.notice)
        convs = store.list_conversations()
        if args.search is not None:
            hit = {h.conversation_id for h in store.search(args.search, limit=10_000)}
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
