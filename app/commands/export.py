"""`llamadesk export`: one conversation as Markdown, JSON, HTML or plain text.

Markdown, HTML and text write the path shown (a message with alternatives
marked "version 2 of 3"), or every branch with --all-branches; JSON always
carries the whole tree.
"""

from __future__ import annotations

import argparse
import sys

from app.commands.common import note
from app.commands.list import write_stdout
from app.history import export
from app.history.store import Store


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="export a conversation to a file",
                       description="Write conversation ID with every message and its stats. "
                                   "JSON is the full-fidelity format `llamadesk import` reads back.")
    p.add_argument("id", type=int, help="the conversation (see `llamadesk list`)")
    p.add_argument("--format", choices=export.FORMATS, default=None,
                   help="default: from the extension of -o (Markdown for stdout)")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="file to write, or - for stdout (the default)")
    p.add_argument("--all-branches", action="store_true",
                   help="Markdown, HTML and text: every branch (edited questions, regenerated replies), "
                        "each after the path shown from where it leaves it; without it, the path shown "
                        "alone. JSON always has every branch")
    return p


def run(args: argparse.Namespace) -> int:
    with Store.open(writable=False) as store:  # exporting only reads: a read-only folder is fine
        if store.notice:
            note(store.notice)
        conv = store.get_conversation(args.id)
    if args.output == "-":
        # Rendered first: an error is not half-printed.
        text = export.render(conv, args.format or "md", args.all_branches)
        return write_stdout(lambda: sys.stdout.write(text))
    path = export.export(conv, args.output, args.format, args.all_branches)
    every = args.all_branches or (args.format or export.format_for(path)) == "json"
    count = len(conv.tree or conv.messages) if every else len(conv.messages)
    note(f"exported conversation {conv.id} ({count} messages) to {path}")
    return 0
