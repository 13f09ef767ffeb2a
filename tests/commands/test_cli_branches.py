"""Branches through the `llamadesk` command: ask --from, list ID --tree, export --all-branches.

The real bundled model (greedy, a few tokens) and real SQLite under the test's XDG dirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.cli import main
from app.history.store import Store
from tests.commands.test_cli_history import ROOT, listed, llamadesk
from tests.transcripts import branched


def ask(*args: str, model) -> dict:
    r = llamadesk("ask", *args, "--json", "--model", str(model), "--ctx", "512", "--temperature", "0",
                  "--max-tokens", "4")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ask_from_a_reply_branches_with_the_path_up_to_it_as_history(model_path):
    first = ask("Hello there", model=model_path)
    cid = first["conversation"]
    second = ask("And then?", "--continue", str(cid), model=model_path)
    ask("Tell me more about owls, please.", "--continue", str(cid), model=model_path)
    with Store.open() as s:
        before = s.get_conversation(cid)
    a1 = before.messages[1]
    assert len(before.messages) == 6

    branch = ask("And then?", "--continue", str(cid), "--from", str(a1.id), model=model_path)
    assert branch["conversation"] == cid
    # The same question after the same two messages: the same prompt, so the history was the path
    # up to the first reply (the path shown had four messages more).
    assert branch["stats"]["prompt_tokens"] == second["stats"]["prompt_tokens"]
    with Store.open() as s:
        conv = s.get_conversation(cid)
        assert len(conv.tree) == 8
        assert [m.content for m in conv.messages][:3] == ["Hello there", first["text"], "And then?"]
        assert len(conv.messages) == 4 and conv.messages[2].parent_id == a1.id
        assert conv.alternatives(conv.messages[2]) == [before.messages[2].id, conv.messages[2].id]
        s.show_branch(cid, before.messages[2].id)  # the earlier branch is whole
        assert [m.id for m in s.get_conversation(cid).messages] == [m.id for m in before.messages]
    assert [c["message_count"] for c in listed()] == [8]


@pytest.fixture
def tree_id() -> int:
    with Store.open() as s:
        return branched(s)


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_ask_from_a_message_elsewhere_is_one_line_before_the_model_loads(tree_id, capsys):
    with Store.open() as s:
        other = s.create_conversation()
        stranger = s.add_message(other, "user", "another chat")
        conv = s.get_conversation(tree_id)
    question = conv.messages[2]  # "question 2": its parent is the first reply
    cases = [
        (["--continue", str(tree_id), "--from", "99999"], f"conversation {tree_id} has no message 99999"),
        (["--continue", str(tree_id), "--from", str(stranger)], f"conversation {tree_id} has no message"),
        (["--continue", str(tree_id), "--from", str(question.id)],
         f"message {question.id} is a question: --from names the message a new question follows; to ask "
         f"in its place, give --from {question.parent_id}"),
        (["--continue", str(tree_id), "--from", str(conv.messages[0].id)], "a new conversation"),
        (["--from", "3"], "--from names a message of the conversation --continue ID continues"),
        (["--continue", str(tree_id), "--from", "3", "--tool-result", "x"], "give one"),
    ]
    with Store.open() as s:
        rows = len(s.get_conversation(tree_id).tree)
    for args, why in cases:
        rc, _out, err = run(capsys, "ask", "hi", *args, "--model", "/nonexistent/model.gguf")
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and why in lines[0], (args, err)
    with Store.open() as s:
        assert len(s.get_conversation(tree_id).tree) == rows


def test_list_tree_draws_every_branch_with_ids_marks_and_versions(tree_id, capsys):
    rc, out, _err = run(capsys, "list", str(tree_id), "--tree")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"Conversation {tree_id}: question 1 · 14 messages on 4 branches")
    body = lines[1:]
    assert len(body) == 14
    with Store.open() as s:
        conv = s.get_conversation(tree_id)
    shown = {m.id for m in conv.messages}
    for m in conv.tree:
        row = next(r for r in body if f" {m.id}  {m.role:<9}  {m.content}" in r)
        assert row.startswith("* ") == (m.id in shown), row
    assert "question 2  (1/2)" in out and "question 2, edited  (2/2)" in out
    assert "answer 5, again 2  (3/3)" in out
    # A chain stays in its column; a branch steps in under what it follows.
    edited = next(r for r in body if "question 2, edited" in r)
    assert "└─ " in edited and body.index(edited) == 12

    rc, out, _err = run(capsys, "list", str(tree_id))
    assert rc == 0 and len(out.splitlines()) == 11 and "answer 2b" not in out and "--tree draws them" in out

    rc, out, _err = run(capsys, "list", str(tree_id), "--tree", "--json")
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [m.id for m in conv.tree]
    assert [r["parent_id"] for r in rows] == [m.parent_id for m in conv.tree]
    assert sum(r["on_path"] for r in rows) == 10
    assert next(r for r in rows if r["content"] == "answer 5, again 2")["version"] == [3, 3]


def test_list_tree_in_an_ascii_terminal_draws_with_ascii(tree_id):
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
    r = subprocess.run([sys.executable, "-m", "app", "list", str(tree_id), "--tree"], cwd=ROOT,
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"`- " in r.stdout and b"|- " in r.stdout and "├".encode() not in r.stdout


def test_list_flags_that_do_not_fit_are_one_line(tree_id, capsys):
    for args, why in [(["list", "--tree"], "--tree draws one conversation: give its ID"),
                      (["list", str(tree_id), "--search", "x"], "with ID, give neither"),
                      (["list", "4242"], "no conversation with id 4242")]:
        rc, _out, err = run(capsys, *args)
        assert rc == 2 and why in err and len(err.strip().splitlines()) == 1, err


def test_export_all_branches(tree_id, tmp_path, capsys):
    rc, out, _err = run(capsys, "export", str(tree_id), "-o", "-", "--all-branches")
    assert rc == 0 and out.count("## Branch ") == 4 and "question 2, edited" in out
    rc, out, _err = run(capsys, "export", str(tree_id), "-o", "-")
    assert rc == 0 and "## Branch" not in out and "question 2, edited" not in out
    assert "(version 2 of 3)" in out
    rc, _out, err = run(capsys, "export", str(tree_id), "-o", str(tmp_path / "all.txt"), "--all-branches")
    assert rc == 0 and "(14 messages)" in err
    rc, _out, err = run(capsys, "export", str(tree_id), "-o", str(tmp_path / "shown.html"))
    assert rc == 0 and "(10 messages)" in err
    rc, _out, err = run(capsys, "export", str(tree_id), "-o", str(tmp_path / "t.json"))
    assert rc == 0 and "(14 messages)" in err
    assert len(json.loads((tmp_path / "t.json").read_text("utf-8"))["conversation"]["messages"]) == 14
    rc, out, _err = run(capsys, "import", str(tmp_path / "t.json"))
    new = int(out.strip())
    rc, out, _err = run(capsys, "list", str(new), "--tree")
    assert rc == 0 and "question 2, edited  (2/2)" in out and len(out.splitlines()) == 15
