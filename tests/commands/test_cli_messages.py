"""What the real `llamadesk` process says when its input or its output is hostile.

Undecodable arguments get one line naming the argument; a reader that goes
away (`| head`) or a closed stdout ends the command quietly, never with a
traceback or "Broken pipe".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from app.history.store import Store

BAD = "\udcff"  # how Python hands over the byte 0xff of an argument that is not UTF-8


def _cli(*args, env=None, **kw):
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "app", *args], timeout=180, env=env, **kw)


def _history() -> list:
    r = _cli("list", "--json", text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("args, line", [
    (["ask", f"hi {BAD}"], "the prompt is not valid UTF-8 text"),
    (["ask", "hi", "--system", f"be {BAD}brief"], "the system prompt (--system) is not valid UTF-8 text"),
    (["ask", f"{BAD}", "--no-save"], "the prompt is not valid UTF-8 text"),
    (["list", "--search", f"x{BAD}"], "the search text (--search) is not valid UTF-8 text"),
])
def test_undecodable_free_text_is_one_line_before_anything_happens(args, line, model_path):
    r = _cli(*args, "--model", str(model_path), text=True) if args[0] == "ask" else _cli(*args, text=True)
    assert r.returncode == 2
    # One line and nothing else: no "no chat template" note, so the model was never loaded.
    assert r.stderr.splitlines() == [f"llamadesk: error: {line}"] and r.stdout == ""
    assert _history() == []  # no conversation was started


def test_undecodable_file_names_are_still_file_names(tmp_path, model_path):
    """A POSIX file name is bytes: the same 0xff names a real folder and is listed, not refused."""
    odd = tmp_path / f"mod{BAD}els"
    odd.mkdir()
    shutil.copyfile(model_path, odd / "copy.gguf")
    r = _cli("models", str(odd))
    assert r.returncode == 0, r.stderr
    assert b"copy.gguf" in r.stdout and b"Traceback" not in r.stderr
    r = _cli("models", str(odd), "--json")
    assert r.returncode == 0 and any(m["file"] == "copy.gguf" for m in json.loads(r.stdout))


@pytest.fixture
def long_conv() -> int:
    """A conversation whose export is larger than a pipe's buffer."""
    with Store.open() as s:
        cid = s.create_conversation(model="gemma.gguf")
        s.add_message(cid, "user", "Héllo · " + "word " * 40_000)
        s.add_message(cid, "assistant", "ok")
        return cid


def _clean(stderr: bytes) -> None:
    text = stderr.decode("utf-8", "replace")
    assert "Traceback" not in text and "Broken pipe" not in text and "Exception ignored" not in text, text


@pytest.mark.parametrize("args", [["models", "--json"], ["models"], ["list"], ["list", "--json"],
                                  ["export", "{id}"], ["export", "{id}", "--format", "html"], ["--help"]])
def test_a_reader_that_is_gone_ends_the_command_quietly(args, long_conv):
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: every write gets EPIPE
    try:
        r = _cli(*(a.format(id=long_conv) for a in args), stdout=write_end, stderr=subprocess.PIPE,
                 capture_output=False)
    finally:
        os.close(write_end)
    assert r.returncode in (0, 141), r.stderr
    _clean(r.stderr)
    assert r.stderr == b""


def test_head_reading_one_byte_of_an_export(long_conv):
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m app export {long_conv} | head -c 1; '
                                      'echo " ${PIPESTATUS[0]}"'], capture_output=True, timeout=120)
    _clean(r.stderr)
    assert r.stderr == b""
    out, rc = r.stdout.decode().rsplit(" ", 1)
    assert out == "#" and rc.strip() in ("0", "141")


def test_a_closed_stdout_is_like_devnull(long_conv):
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m app list --json >&-; echo "rc=$?" >&2;'
                                      f'"{sys.executable}" -m app export {long_conv} >&-; echo "rc=$?" >&2'],
                       capture_output=True, timeout=120)
    _clean(r.stderr)
    assert r.stderr.decode().split() == ["rc=0", "rc=0"]


def test_ask_into_a_closed_pipe_keeps_the_question(model_path):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = _cli("ask", "Count to ten.", "--model", str(model_path), "--max-tokens", "8", "--ctx", "256",
                 "--threads", "1", stdout=write_end, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write_end)
    assert r.returncode == 141, r.stderr
    _clean(r.stderr)
    [conv] = _history()
    assert conv["title"] == "Count to ten." and conv["message_count"] == 2  # the partial reply too


def test_an_ascii_only_stdout_gets_escapes_not_a_codec_error(long_conv):
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    r = _cli("export", str(long_conv), env=env)
    assert r.returncode == 0, r.stderr
    assert b"H\\xe9llo \\xb7 word" in r.stdout and r.stdout.isascii()


def test_list_json_of_a_conversation_carries_a_replys_reasoning_apart():
    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", "Which bird?")
        s.add_message(cid, "assistant", "The heron.", reasoning="Maybe a pelican; no, a heron.")
    r = _cli("list", str(cid), "--json", text=True)
    assert r.returncode == 0, r.stderr
    question, answer = json.loads(r.stdout)
    assert answer["content"] == "The heron." and answer["reasoning"] == "Maybe a pelican; no, a heron."
    assert "reasoning" not in question
