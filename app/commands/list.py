"""`llamadesk list`: the conversations in the shared history (the window's too)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from app.chat.store import Store
from app.commands.common import note


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list saved conversations",
                       description="List saved conversations, most recently active first.")
    p.add_argument("--json", action="store_true", help="print one JSON array")
    p.add_argument("--search", metavar="TEXT", help="only conversations with a message containing TEXT")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="show at most N")
    return p


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {args.limit}")
    with Store.open() as store:
        if store.notice:
            note(store.notice)
        convs = store.list_conversations()
        if args.search is not None:
            hit = {h.conversation_id for h in store.search(args.search, limit=10_000)}
            convs = [c for c in convs if c.id in hit]
    convs = convs[: args.limit] if args.limit else convs
    if args.json:
        json.dump([{"id": c.id, "title": c.title, "message_count": c.message_count,
                    "created_at": _iso(c.created_at), "updated_at": _iso(c.updated_at), "model": c.model}
                   for c in convs], sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return 0
    if not convs:
        print("no conversations" + (" match" if args.search is not None else " yet"), file=sys.stderr)
        return 0
    width = max(len(str(c.id)) for c in convs)
    for c in convs:
        updated = datetime.fromtimestamp(c.updated_at).strftime("%Y-%m-%d %H:%M")
        print(f"{c.id:>{width}}  {updated}  {c.message_count:>5} msgs  {c.title or '(untitled)'}")
    return 0
