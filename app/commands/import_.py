"""`llamadesk import`: bring a JSON transcript back into the history, identically.

(The module is import_.py because `import` is a keyword; the command is `import`.)
"""

from __future__ import annotations

import argparse

from app.commands.common import note
from app.history import transcript
from app.history.store import Store


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("import", help="import a JSON transcript",
                       description="Add the conversation in FILE (written by `llamadesk export "
                                   "--format json` or the window) to the history as a new conversation.")
    p.add_argument("file", help="a LlamaDesk JSON transcript")
    return p


def run(args: argparse.Namespace) -> int:
    conv = transcript.load(args.file)  # validated in full before the store is touched
    with Store.open() as store:
        if store.notice:
            note(store.notice)
        new_id = store.import_conversation(conv)
    title = " ".join(conv.title.split()) or "(untitled)"  # an imported title may hold newlines
    note(f"imported {args.file} as conversation {new_id}: {title} ({len(conv.messages)} messages)")
    print(new_id)
    return 0
