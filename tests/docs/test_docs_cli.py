"""`llamadesk docs` run as a person runs it, in temporary XDG folders (tests/conftest.py sets
them for the child too): add, list, search, re-add, remove, and Ctrl+C midway."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from tests.docs import files


def _docs(*args, **kw):
    return subprocess.run([sys.executable, "-m", "app", "docs", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ}, **kw)


def test_add_list_search_readd_remove(tmp_path, isolated_dirs):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "INSTALL.md").write_text(files.MARKDOWN, encoding="utf-8")
    files.pdf(root / "story.pdf")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))

    r = _docs("add", str(root), "--name", "notes")
    assert r.returncode == 0, r.stderr
    assert "notes: 2 added, 0 updated, 0 unchanged, 0 deleted, 1 failed" in r.stdout
    assert "latin1.txt: not UTF-8 text" in r.stderr and "Traceback" not in r.stderr

    listed = json.loads(_docs("list", "--json").stdout)
    assert [(c["name"], c["files"], c["pages"]) for c in listed] == [("notes", 2, 4)]
    assert "notes\t2 files, 4 pages" in _docs("list").stdout

    hits = json.loads(_docs("search", "notes", "When does the ferry leave?", "--json", "--k", "2").stdout)
    assert hits[0]["document"] == "story.pdf" and hits[0]["where"] == "page 2" and len(hits) <= 2
    shown = _docs("search", "notes", "make install linux")
    assert shown.returncode == 0 and "[1] " in shown.stdout and "(Install > Linux)" in shown.stdout

    (root / "story.pdf").unlink()
    r = _docs("add", str(root), "--name", "notes")
    assert "0 added, 0 updated, 1 unchanged, 1 deleted" in r.stdout
    assert "story.pdf: deleted since the last index" in r.stderr

    missing = _docs("search", "other", "x")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no collection named 'other'" in missing.stderr
    assert _docs("remove", "notes").returncode == 0
    assert json.loads(_docs("list", "--json").stdout) == []
    bad = _docs("add", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot be opened" in bad.stderr
    assert (isolated_dirs / "xdg_data_home" / "llamadesk" / "docs.db").exists()


def _as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_midway_keeps_the_files_done(tmp_path, isolated_dirs):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(150):
        (root / f"page{i:03}.html").write_text(files.HTML.replace("Brewing tea", f"Brewing tea {i}"))
    db = tmp_path / "docs.db"
    cmd = [sys.executable, "-m", "app", "docs", "--db", str(db), "add", str(root), "--name", "many"]
    p = subprocess.Popen(cmd,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ},
                         preexec_fn=_as_at_a_terminal)
    end = time.monotonic() + 120
    done = 0
    while done < 5:
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end
        time.sleep(0.1)
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                done = c.execute("select count(*) from documents").fetchone()[0]
        except sqlite3.Error:
            pass
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert out == ""
    assert p.returncode == 130 and "Traceback" not in err and "cancelled" in err, err
    listed = json.loads(_docs("--db", str(db), "list", "--json").stdout)
    kept = listed[0]["files"]
    assert 5 <= kept < 150
    r = _docs("--db", str(db), "add", str(root), "--name", "many")
    assert r.returncode == 0 and f"{150 - kept} added, 0 updated, {kept} unchanged" in r.stdout
