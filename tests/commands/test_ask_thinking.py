"""`llamadesk ask --endpoint` with a thinking model on a real llama-server
(tests/remote/thinking_servers.py): the answer alone on stdout, the thinking on stderr (dimmed only
on a terminal), --hide-thinking, --json, --think and --think-budget."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest

from tests.remote.thinking_servers import ANSWER_GRAMMAR, QWEN3, THINKING_GRAMMAR, start_thinking_server

THOUGHT = re.compile(r"First, [a-z]{3,8} [a-z]{3,8} [a-z]{3,8}\.")
ANSWER = re.compile(r"The answer is [a-z]{3,8}\.")
DIM = "\x1b[2m"
XDG_VARS = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


@pytest.fixture(scope="module")
def qwen3(model_path):
    srv = start_thinking_server(model_path, QWEN3)
    yield srv
    srv.stop()


@pytest.fixture
def shaped(tmp_path):
    """The grammar file that holds the base model to a thinking model's shape."""
    def write(text: str = THINKING_GRAMMAR):
        p = tmp_path / "shape.gbnf"
        p.write_text(text)
        return str(p)
    return write


def _ask(qwen3, grammar: str, *args, stderr=subprocess.PIPE, env=None):
    return subprocess.run([sys.executable, "-m", "app", "ask", "--endpoint", qwen3.base + "/v1", "--no-save",
                           "--grammar", grammar, "--temperature", "0", "--seed", "7", "--max-tokens", "64",
                           *args, "What colour is the sky?"],
                          stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=300, env=env)


def test_ask_prints_the_thinking_on_stderr_and_the_answer_alone_on_stdout(qwen3, shaped):
    r = _ask(qwen3, shaped())
    assert r.returncode == 0, r.stderr
    assert ANSWER.fullmatch(r.stdout.strip()), r.stdout
    assert THOUGHT.search(r.stderr), r.stderr
    assert "First," not in r.stdout and DIM not in r.stderr  # stderr is a pipe here: plain text
    # The thinking comes before the footer, on lines of its own.
    assert r.stderr.index("First,") < r.stderr.index("decode")


def test_hide_thinking_drops_it(qwen3, shaped):
    r = _ask(qwen3, shaped(), "--hide-thinking")
    assert r.returncode == 0, r.stderr
    assert ANSWER.fullmatch(r.stdout.strip()) and "First," not in r.stderr


@pytest.fixture(scope="module")
def as_json(qwen3, tmp_path_factory):
    """`ask --json --think on`, run once for the tests that read it."""
    home = tmp_path_factory.mktemp("home")  # set up before the per-test private home: its own
    grammar = home / "shape.gbnf"
    grammar.write_text(THINKING_GRAMMAR)
    env = {**os.environ, "HOME": str(home)}
    for v in XDG_VARS:
        env[v] = str(home / v.lower())
        (home / v.lower()).mkdir()
    return _ask(qwen3, str(grammar), "--json", "--think", "on", env=env)


def test_json_carries_the_thinking_and_its_times(as_json):
    r = as_json
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert THOUGHT.fullmatch(out["reasoning"].strip()) and ANSWER.fullmatch(out["text"].strip())
    st = out["stats"]
    assert st["ttft_s"] < st["ttfa_s"] and st["reasoning_s"] > 0
    assert "reasoning_tokens" in st and st["reasoning_tokens"] is None  # llama-server does not count them
    assert "First," not in r.stderr  # in the JSON, not printed as well


def test_on_a_terminal_the_thinking_is_dimmed(qwen3, shaped):
    main, side = pty.openpty()
    try:
        r = _ask(qwen3, shaped(), stderr=side)
        os.close(side)
        side = -1
        got = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            got += chunk
    finally:
        os.close(main)
        if side != -1:
            os.close(side)
    err = got.decode(errors="replace")
    assert r.returncode == 0, err
    assert DIM + "First, " in err and "\x1b[0m" in err, err
    assert ANSWER.fullmatch(r.stdout.strip())


def test_think_off_reaches_the_server(qwen3, shaped, as_json):
    """--think off: Qwen3's template closes the thinking in the prompt, and none comes back."""
    off = _ask(qwen3, shaped(ANSWER_GRAMMAR), "--json", "--think", "off", "--max-tokens", "16")
    assert off.returncode == 0, off.stderr
    on, off = json.loads(as_json.stdout), json.loads(off.stdout)
    assert on["reasoning"] and off["reasoning"] == "" and ANSWER.fullmatch(off["text"].strip())
    assert off["stats"]["prompt_tokens"] > on["stats"]["prompt_tokens"]
    assert off["stats"]["ttfa_s"] is None


@pytest.mark.parametrize("flags, words", [
    (["--think", "maybe"], "invalid choice: 'maybe'"),
    (["--think-budget", "-1"], "--think-budget must be between 0 and"),
    (["--think-budget", "many"], "invalid int value"),
])
def test_a_bad_thinking_flag_is_one_line_and_exit_2(flags, words):
    r = subprocess.run([sys.executable, "-m", "app", "ask", "--no-save", "--endpoint", "http://127.0.0.1:9/v1",
                        *flags, "hi"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
