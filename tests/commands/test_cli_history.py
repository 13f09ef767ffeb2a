"""The history through the real `llamadesk` command: ask, list, export, import."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from app.history import migrations, transcript
from app.history.store import Store, default_path
from tests.transcripts import by_position

ROOT = Path(__file__).resolve().parents[2]


def llamadesk(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llamadesk: error: "), r.stderr
    return lines[0]


def listed() -> list[dict]:
    r = llamadesk("list", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ask_records_continues_and_no_save_does_not(model_path):
    model = ["--model", str(model_path), "--ctx", "512", "--temperature", "0", "--max-tokens", "6"]
    r = llamadesk("ask", "Hello there", "--json", "--system", "Be brief.", *model)
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    cid = first["conversation"]
    assert [(c["id"], c["title"], c["message_count"]) for c in listed()] == [(cid, "Hello there", 2)]

    r = llamadesk("ask", "And then?", "--continue", str(cid), *model)
    assert r.returncode == 0, r.stderr
    assert f"saved as conversation {cid}" in r.stderr
    with Store.open() as s:
        conv = s.get_conversation(cid)
    assert [m.content for m in conv.messages][:3] == ["Hello there", first["text"], "And then?"]
    assert conv.system_prompt == "Be brief." and conv.model == model_path.name
    assert conv.messages[3].stats.prompt_tokens > first["stats"]["prompt_tokens"]  # history was sent

    r = llamadesk("ask", "Forget this", "--no-save", "--json", *model)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["conversation"] is None
    assert [c["message_count"] for c in listed()] == [4]

    r = llamadesk("list")
    assert r.returncode == 0 and f"{cid}" in r.stdout and "Hello there" in r.stdout and "4 msgs" in r.stdout


def test_continue_of_a_missing_conversation_fails_before_loading(model_path):
    line = one_line_error(llamadesk("ask", "hi", "--continue", "99", "--model", str(model_path)))
    assert "no conversation with id 99" in line and str(default_path()) in line


@pytest.fixture
def saved() -> int:
    with Store.open() as s:
        cid = s.create_conversation(system_prompt="sys")
        s.add_message(cid, "user", "Question <script>x</script>")
        s.add_message(cid, "assistant", "Answer with **bold**")
        s.add_message(cid, "user", "unrelated zebra")
    return cid


def test_list_search_and_empty(saved):
    r = llamadesk("list")
    assert r.returncode == 0 and "Question" in r.stdout
    assert [c["id"] for c in json.loads(llamadesk("list", "--json", "--search", "ZEBRA").stdout)] == [saved]
    assert json.loads(llamadesk("list", "--json", "--search", "giraffe").stdout) == []


def test_export_to_stdout_and_files(saved, tmp_path):
    r = llamadesk("export", str(saved), "-o", "-")
    assert r.returncode == 0, r.stderr
    tokens = MarkdownIt("commonmark").parse(r.stdout)
    assert [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"] == \
           ["Question <script>x</script>", "User", "Assistant", "User"]
    for ext in ("md", "json", "html", "txt"):
        out = tmp_path / f"t.{ext}"
        r = llamadesk("export", str(saved), "-o", str(out))
        assert r.returncode == 0 and out.exists() and str(out) in r.stderr
    assert json.loads((tmp_path / "t.json").read_text("utf-8"))["format"] == transcript.FORMAT
    assert "&lt;script&gt;" in (tmp_path / "t.html").read_text("utf-8")
    r = llamadesk("export", str(saved), "--format", "txt", "-o", str(tmp_path / "plain.dat"))
    assert r.returncode == 0 and (tmp_path / "plain.dat").read_text("utf-8").startswith("Question")


def test_export_errors_are_one_line(saved, tmp_path):
    line = one_line_error(llamadesk("export", str(saved), "-o", str(tmp_path / "no" / "such" / "x.md")))
    assert "nothing was written" in line
    assert not (tmp_path / "no").exists()
    assert "format" in one_line_error(llamadesk("export", str(saved), "-o", str(tmp_path / "x.docx")))
    assert "no conversation with id 404" in one_line_error(llamadesk("export", "404", "-o", "-"))


def test_import_round_trip_through_the_cli(saved, tmp_path):
    out = tmp_path / "t.json"
    assert llamadesk("export", str(saved), "-o", str(out)).returncode == 0
    r = llamadesk("import", str(out))
    assert r.returncode == 0, r.stderr
    new_id = int(r.stdout.strip())
    back = tmp_path / "back.json"
    assert llamadesk("export", str(new_id), "-o", str(back)).returncode == 0
    a, b = (by_position(json.loads(p.read_text("utf-8"))) for p in (out, back))  # ids are renumbered
    assert a == b


def test_malformed_import_is_one_line_and_writes_nothing(saved, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "llamadesk.transcript", "version": 99, "conversation": {}}')
    before = listed()
    line = one_line_error(llamadesk("import", str(bad)))
    assert str(bad) in line and "version 99" in line
    bad.write_text("{oops")
    assert "not valid JSON" in one_line_error(llamadesk("import", str(bad)))
    assert listed() == before


def test_newer_database_is_refused_by_every_command(tmp_path):
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {migrations.CURRENT + 5}")
    conn.close()
    before = path.read_bytes()
    for args in (["list"], ["export", "1"], ["ask", "hi", "--continue", "1"]):
        assert "newer LlamaDesk" in one_line_error(llamadesk(*args))
    assert path.read_bytes() == before


def test_unreadable_database_is_moved_aside_and_said_so():
    path = default_path()
    path.write_bytes(b"\x00garbage" * 300)
    r = llamadesk("list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == []
    assert "moved it to" in r.stderr
    moved = [p for p in path.parent.iterdir() if p.name.startswith("llamadesk.db.unreadable-")]
    assert len(moved) == 1 and moved[0].read_bytes() == b"\x00garbage" * 300
    assert str(moved[0]) in r.stderr


def test_engine_error_after_streamed_text_keeps_question_and_partial_reply(model_path, monkeypatch,
                                                                          capsys):
    """The CLI half of the one recording policy (the window's is in tests/ui/test_chat_window.py)."""
    from app.cli import main
    from app.history.records import INTERRUPTED
    from tests.faults import failing_decode_after

    failing_decode_after(monkeypatch, 8)  # the prefill and a few tokens, then llama_decode fails
    rc = main(["ask", "Tell me a story.", "--model", str(model_path), "--ctx", "512",
               "--temperature", "0", "--max-tokens", "40"])
    out, err = capsys.readouterr()
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("llamadesk: error: ")]
    assert len(errors) == 1 and "llama_decode failed while generating" in errors[0]
    assert "Traceback" not in err
    shown = out.strip()
    assert shown  # the text streamed before the failure
    with Store.open() as store:
        (conv,) = store.list_conversations()
        question, reply = store.get_conversation(conv.id).messages
    assert question.content == "Tell me a story."
    assert reply.state == INTERRUPTED and reply.content == shown
    assert reply.stats.stop_reason == "error"


# --- hostile input ---------------------------------------------------------------

def test_a_prompt_of_undecodable_bytes_is_one_line_and_leaves_no_conversation(model_path):
    r = subprocess.run([sys.executable, "-m", "app", "ask", b"hi \xff", "--model", str(model_path),
                        "--ctx", "512", "--max-tokens", "2"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert "not valid UTF-8 text" in one_line_error_among_notes(r)  # said by ask or by the store
    assert listed() == []


def one_line_error_among_notes(r: subprocess.CompletedProcess) -> str:
    """Like one_line_error, allowing the model's own notes (`llamadesk: ...`) before it."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert all(line.startswith("llamadesk: ") for line in lines), r.stderr
    errors = [line for line in lines if line.startswith("llamadesk: error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.parametrize("bad_id", ["99999999999999999999", "-99999999999999999999", "9223372036854775808"])
def test_ids_beyond_sqlite_are_not_found_in_one_line(saved, bad_id):
    assert f"no conversation with id {bad_id}" in one_line_error(llamadesk("export", bad_id))
    line = one_line_error(llamadesk("ask", "hi", "--continue", bad_id, "--model", "none.gguf"))
    assert f"no conversation with id {bad_id}" in line


def test_negative_schema_version_is_refused_untouched_by_every_command(tmp_path):
    path = default_path()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = -1")
    conn.close()
    before = path.read_bytes()
    doc = tmp_path / "t.json"
    doc.write_text(json.dumps({"format": transcript.FORMAT, "version": 1, "conversation": {
        "title": "t", "created_at": 1.0, "updated_at": 1.0, "messages": []}}))
    for args in (["list"], ["export", "1"], ["ask", "hi", "--continue", "1"], ["import", str(doc)]):
        line = one_line_error(llamadesk(*args))
        assert "schema version -1" in line and "left untouched" in line
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["llamadesk.db"]


@pytest.mark.parametrize("stored", ["1e300", "-1e300", "9e18", "'soon'", "-5"])
def test_a_stored_time_out_of_range_shows_as_unknown_and_never_stops_the_list(saved, stored):
    with Store.open() as s:
        other = s.create_conversation()
        s.add_message(other, "user", "fine row")
    conn = sqlite3.connect(default_path())
    conn.execute(f"UPDATE conversations SET updated_at = {stored}, created_at = {stored} WHERE id = ?",
                 (saved,))
    conn.commit()
    conn.close()
    r = llamadesk("list")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()}
    assert "fine row" in rows[str(other)]
    if stored != "-5":  # 1969 is a real (if odd) time; the others are not
        assert rows[str(saved)].split()[1] == "?"
    rows = {c["id"]: c for c in listed()}
    assert rows[other]["updated_at"] is not None
    if stored != "-5":
        assert rows[saved]["updated_at"] is None and rows[saved]["created_at"] is None


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path):
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "a long one " * 30_000)
    conn = sqlite3.connect(default_path())
    conn.executemany("INSERT INTO conversations (title, created_at, updated_at, settings) "
                     "VALUES (?, 1.7e9, 1.7e9, '{}')", [(f"conversation {i} " * 3,) for i in range(4000)])
    conn.commit()
    conn.close()
    for args in (["list"], ["list", "--json"], ["export", str(cid)]):
        p = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline()  # `| head -1`: one line, then the pipe is closed
        p.stdout.close()
        err = p.stderr.read()
        p.stderr.close()
        assert p.wait(timeout=60) in (0, 141) and err == "", (args, err)
