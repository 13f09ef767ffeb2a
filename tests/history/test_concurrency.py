"""Two LlamaDesk processes writing the same history at once lose nothing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from app.history.records import COMPLETE
from app.history.store import Store, default_path

WRITER = """
import sys, time
from app.history.store import Store
name, shared, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with Store.open() as s:
    own = s.create_conversation(title=name)
    while not __import__("os").path.exists(go):  # start together, to collide
        time.sleep(0.005)
    for i in range(n):
        s.add_message(shared, "user", f"{name} shared {i}")
        r = s.begin_reply(own)
        s.update_reply(r, f"{name} partial {i}")
        s.finish_reply(r, f"{name} reply {i}", None)
        if i % 25 == 0:
            s.rename_conversation(own, f"{name} at {i}")
print("done")
"""


def race(script: str, args: list[str], tmp_path: Path) -> None:
    """Run `script` as two processes ("window" and "cli") released at the same instant."""
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", script, name, *args, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("window", "cli")]
    time.sleep(0.5)
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "done", err


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path):
    n = 150
    with Store.open() as s:
        shared = s.create_conversation(title="shared")
    race(WRITER, [str(shared), str(n)], tmp_path)
    with Store.open() as s:
        convs = {c.title: c for c in s.list_conversations()}
        assert convs["shared"].message_count == 2 * n
        texts = [m.content for m in s.get_conversation(shared).messages]
        for name in ("window", "cli"):
            mine = [t for t in texts if t.startswith(f"{name} ")]
            assert mine == [f"{name} shared {i}" for i in range(n)]  # all there, in each writer's order
            own = convs[f"{name} at {n - 1 - (n - 1) % 25}"]
            msgs = s.get_conversation(own.id).messages
            assert [m.content for m in msgs] == [f"{name} reply {i}" for i in range(n)]
            assert {m.state for m in msgs} == {COMPLETE}
        assert s.recovered == 0


TURNS = """
import os, sys, time
from app.history.store import Store
name, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Store.open() as s:
    while not os.path.exists(go):
        time.sleep(0.005)
    for i in range(n):
        s.begin_turn(None, f"{name} {i}", system_prompt=name, model=None, settings={"i": i})
print("done")
"""


def test_first_writes_of_turns_from_two_processes_are_each_whole(tmp_path: Path):
    """begin_turn is one transaction: interleaved, every conversation still has its
    question and its reply row, never one without the other."""
    n = 60
    Store.open().close()
    race(TURNS, [str(n)], tmp_path)
    # Read the rows as the writers left them: opening a Store would already recover
    # (remove) their empty "generating" replies, whose writers have exited.
    conn = sqlite3.connect(f"file:{default_path()}?mode=ro", uri=True)
    try:
        convs = conn.execute("SELECT id, title, system_prompt FROM conversations").fetchall()
        assert len(convs) == 2 * n
        for cid, title, system in convs:
            rows = conn.execute("SELECT role, content, state FROM messages WHERE conversation_id = ? "
                                "ORDER BY id", (cid,)).fetchall()
            assert [(r[0], r[2]) for r in rows] == [("user", "complete"), ("assistant", "generating")]
            assert title == rows[0][1] and title.startswith(system)
    finally:
        conn.close()
