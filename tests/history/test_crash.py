"""kill -9 of a real `llamadesk ask` mid-reply keeps the text saved so far, marked interrupted."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.history.records import INTERRUPTED
from app.history.store import Store, default_path

ROOT = Path(__file__).resolve().parents[2]


def poll(db: Path):
    """(content, state, updated_at) of the reply, read as another process would."""
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT content, state, updated_at FROM messages "
                            "WHERE role = 'assistant'").fetchone()
    except sqlite3.OperationalError:  # not created yet
        return None
    finally:
        conn.close()


@pytest.mark.slow
def test_kill_9_mid_reply_leaves_the_partial_reply_interrupted(model_path):
    db = default_path()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "ask", "Continue counting: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
         "--model", str(model_path), "--temperature", "0", "--max-tokens", "3000", "--ctx", "4096",
         "--repeat-penalty", "1.0"],  # counting repeats its commas: unpenalized, it runs on
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    saves: list[float] = []  # distinct updated_at values seen while it generated
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"ask ended before the kill: {proc.stderr.read().decode()}"
            row = poll(db)
            if row and row[0]:
                if not saves or row[2] != saves[-1]:
                    saves.append(row[2])
                if saves[-1] - saves[0] >= 4.0:  # a few seconds of saving observed
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("no partial reply reached the database in time")
        time.sleep(0.45)  # kill just before the next save is due: the worst case
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)  # reaped, so its pid is really gone
        printed = proc.stdout.read().decode("utf-8", "replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # Saved again and again while it grew, not only at the end. How often is
    # ReplySaver's rule; a wall-clock gap on a loaded machine cannot judge it.
    assert len(saves) >= 3, f"only {len(saves)} saves seen while the reply grew"

    before = poll(db)
    assert before[1] == "generating"  # as the killed process left it
    with Store.open() as store:
        assert store.recovered == 1
        (summary,) = store.list_conversations()
        conv = store.get_conversation(summary.id)
    user, reply = conv.messages
    assert user.content.startswith("Continue counting")
    assert reply.state == INTERRUPTED and reply.stats is None
    assert reply.content == before[0] and len(reply.content) > 0
    assert printed.startswith(reply.content)  # the saved text is what the user saw, up to the kill
    print(f"\nsaves seen: {len(saves)}; printed {len(printed)} chars, saved {len(reply.content)}")

    # The next `llamadesk` shows it too, marked.
    out = subprocess.run([sys.executable, "-m", "app", "export", str(conv.id), "--format", "md"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "## Assistant (interrupted)" in out.stdout
    listed = subprocess.run([sys.executable, "-m", "app", "list", "--json"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert json.loads(listed.stdout)[0]["message_count"] == 2
