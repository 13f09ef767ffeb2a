"""Every reply from a server is untrusted input: wrong shapes, broken encodings, absurd figures,
invalid text and echoed keys, each sent for real over a socket by a misbehaving server, end in
one line (or a figure shown as not reported), never a traceback, and never print the key."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, RemoteError
from tests.remote.servers import FaultServer, answer

MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})
KEY = "sk-untrusted-0123456789abcdef"
DONE = 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'


def _sse(*chunks: dict | str, tail: str = DONE) -> str:
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks) + tail


@pytest.fixture
def server():
    made = []

    def make(post, models: str = MODELS):
        def behave(h):
            if h.path.endswith("/models"):
                return answer(h, 200, models)
            post(h)
        s = FaultServer(behave)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


def _stream(body: str | bytes, headers: dict | None = None):
    return lambda h: answer(h, 200, body, "text/event-stream", headers)


def _reply(srv, notes=None, key=None):
    notice = None if notes is None else notes.append
    eng = RemoteChatEngine(Endpoint.parse(srv.base + "/v1", key), notice=notice)
    try:
        return eng.reply([], "hi")
    finally:
        eng.close()


HELLO = {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}


def _ask(*args: str):
    return subprocess.run([sys.executable, "-m", "app", "ask", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("bad, words", [
    ({"choices": "not a list"}, "'choices' is a string"),
    ({"choices": 7}, "'choices' is a number"),
    ({"choices": ["a string choice"]}, "not a list of objects"),
    ({"choices": [{"index": 0, "delta": ["a", "list"]}]}, "'delta' is a list"),
    ({"choices": [{"index": 0, "delta": {"content": 42}}]}, "'content' is a number"),
    ({"choices": [{"index": 0, "delta": {"content": ["x"]}}]}, "'content' is a list"),
    ({"choices": [{"index": 0, "text": {"a": 1}}]}, "'text' is an object"),
])
def test_a_chunk_of_the_wrong_shape_ends_the_reply_keeping_what_was_shown(server, bad, words):
    r = _reply(server(_stream(_sse(HELLO, bad))))
    assert r.text == "Hello" and r.stats.stop_reason == "error"
    assert r.stats.error.startswith("the server sent a malformed reply") and words in r.stats.error


def test_null_choices_and_content_are_simply_empty(server):
    r = _reply(server(_stream(_sse({"choices": None}, {"choices": [{"index": 0, "delta": {"content": None}}]},
                                   HELLO))))
    assert r.text == "Hello" and r.stats.error is None


def test_ask_on_a_malformed_reply_is_one_line_and_exit_1(server):
    srv = server(_stream(_sse({"choices": [{"index": 0, "delta": {"content": 3.5}}]})))
    r = _ask("--no-save", "--endpoint", srv.base + "/v1", "hi")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "malformed reply" in r.stderr.strip().splitlines()[-1]


def test_a_gzip_body_that_is_not_gzip_is_a_malformed_reply(server):
    r = _reply(server(_stream(b"\x1f\x8bnot really gzip at all", {"Content-Encoding": "gzip"})))
    assert r.stats.stop_reason == "error"
    assert "malformed reply" in r.stats.error and "encoding" in r.stats.error
    good = gzip.compress(_sse(HELLO).encode())
    assert _reply(server(_stream(good, {"Content-Encoding": "gzip"}))).text == "Hello"


def test_a_model_list_that_is_not_gzip_either_is_one_line(server):
    srv = FaultServer(lambda h: answer(h, 200, b"\x1f\x8b garbage", headers={"Content-Encoding": "gzip"}))
    try:
        with pytest.raises(RemoteError) as e:
            RemoteChatEngine(Endpoint.parse(srv.base + "/v1"))
    finally:
        srv.stop()
    assert "malformed reply" in str(e.value) and "\n" not in str(e.value)


def test_implausible_figures_are_not_reported_and_said_once_each(server):
    usage = {"prompt_tokens": 10**30, "completion_tokens": -3, "total_tokens": 5,
             "prompt_tokens_details": {"cached_tokens": 4}}
    timings = '{"prompt_n": 4, "prompt_ms": -1, "predicted_per_second": 1.99e24, "predicted_ms": Infinity}'
    last = ('data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], '
            f'"usage": {json.dumps(usage)}, "timings": {timings}}}\n\ndata: [DONE]\n\n')
    body = _sse(HELLO, tail="") + last
    notes: list[str] = []
    st = _reply(server(_stream(body)), notes).stats
    assert st.prompt_tokens is None and st.decode_tok_s is None and st.prefill_s is None
    assert st.decode_s is None and st.decode_tokens is None
    assert st.cached_tokens == 4 and st.error is None  # what is plausible is kept
    named = " ".join(notes)
    for name in ("prompt_tokens", "completion_tokens", "prompt_ms", "predicted_per_second", "predicted_ms"):
        assert name in named
    assert all(n.endswith("shown as not reported") for n in notes)
    assert "not reported" in st.summary() and "e+24" not in st.summary()


def test_ask_json_stays_json_whatever_the_server_reports(server):
    usage = ('data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}, '
             '"timings": {"predicted_per_second": Infinity, "prompt_per_second": NaN}}\n\n')
    srv = server(_stream(_sse(HELLO, tail="") + usage + DONE))
    r = _ask("--no-save", "--json", "--endpoint", srv.base + "/v1", "hi")
    assert r.returncode == 0, r.stderr

    def refuse(name):
        raise AssertionError(f"{name} in --json output")
    doc = json.loads(r.stdout, parse_constant=refuse)
    assert doc["stats"]["decode_tok_s"] is None and doc["stats"]["prompt_tokens"] == 3


def test_a_negative_or_absurd_context_is_not_reported(server):
    models = json.dumps({"object": "list", "data": [{"id": "m", "meta": {"n_ctx": -4096}}]})
    srv = server(_stream(_sse(HELLO)), models)
    eng = RemoteChatEngine(Endpoint.parse(srv.base + "/v1"))
    try:
        assert eng.n_ctx is None and "ctx" not in eng.report.runs_on
    finally:
        eng.close()


def test_text_that_is_not_valid_unicode_is_shown_and_saved_alike(server, isolated_dirs):
    lone = '{"choices": [{"index": 0, "delta": {"content": "a\\ud800b"}}]}'
    split_pair = ['{"choices": [{"index": 0, "delta": {"content": "x\\ud83d"}}]}',
                  '{"choices": [{"index": 0, "delta": {"content": "\\ude00y"}}]}']
    notes: list[str] = []
    r = _reply(server(_stream(_sse(lone, *split_pair))), notes)
    assert r.text == "a\ufffdbx\U0001F600y"  # the lone half replaced; the split pair joined again
    assert len(notes) == 1 and "not valid Unicode" in notes[0]
    r.text.encode("utf-8")  # storable
    srv = server(_stream(_sse(lone)))
    out = _ask("--endpoint", srv.base + "/v1", "hi")
    assert out.returncode == 0, out.stderr
    saved = subprocess.run([sys.executable, "-m", "app", "export", "1", "--format", "json"],
                           capture_output=True, text=True, timeout=60)
    assert saved.returncode == 0, saved.stderr
    assert "a\ufffdb" in json.loads(saved.stdout)["conversation"]["messages"][-1]["content"]


def test_a_server_that_echoes_the_key_never_gets_it_printed_or_saved(server, isolated_dirs, tmp_path):
    echo = json.dumps({"error": {"message": f"bad header Authorization: Bearer {KEY}"}})
    srv = FaultServer(lambda h: answer(h, 401, echo))
    try:
        with pytest.raises(RemoteError) as e:
            RemoteChatEngine(Endpoint.parse(srv.base + "/v1", KEY))
        assert KEY not in str(e.value) and "refused the API key" in str(e.value)
    finally:
        srv.stop()
    mid = server(lambda h: answer(h, 200, _sse(HELLO, {"error": {"message": f"key {KEY} revoked"}}),
                                  "text/event-stream"))
    r = _reply(mid, key=KEY)
    assert r.text == "Hello" and KEY not in r.stats.error and "cdef" in r.stats.error
    batch = tmp_path / "in.jsonl"
    batch.write_text(json.dumps({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi"}]}})
                     + "\n")
    out = subprocess.run([sys.executable, "-m", "app", "batch", str(batch), "-o", str(tmp_path / "out.jsonl"),
                          "--endpoint", mid.base + "/v1", "--api-key-env", "THE_KEY"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "THE_KEY": KEY})
    assert KEY not in out.stdout + out.stderr + (tmp_path / "out.jsonl").read_text()


@pytest.mark.parametrize("key", ["sk-abc\ndef-0123456789", "sk-abc\tdef", "sk-\u00e9t\u00e9-key"])
def test_a_key_no_header_can_carry_is_refused_up_front_without_showing_it(key):
    with pytest.raises(EndpointConfigError) as e:
        Endpoint.parse("http://127.0.0.1:9/v1", key)
    msg = str(e.value)
    assert "\n" not in msg and key.split("\n")[0] not in msg and "API key" in msg


def test_a_speculating_servers_guesses_are_shown_and_an_impossible_count_is_not(server):
    def finish(timings: str) -> str:
        return (_sse(HELLO, tail="") + 'data: {"choices": [{"index": 0, "delta": {}, '
                f'"finish_reason": "stop"}}], "timings": {timings}}}\n\n' + DONE)

    st = _reply(server(_stream(finish('{"draft_n": 40, "draft_n_accepted": 30}')))).stats
    assert (st.spec_mode, st.draft_tokens, st.draft_accepted) == ("server", 40, 30)
    assert "the server's guesses: 30 of 40 guesses kept (75%)" in st.speculation()
    notes: list[str] = []
    bad = _reply(server(_stream(finish('{"draft_n": 4, "draft_n_accepted": 9}'))), notes).stats
    assert bad.spec_mode is None and bad.speculation() is None
    assert any("draft_n_accepted" in n for n in notes)
    plain = _reply(server(_stream(finish('{"draft_n": 0, "draft_n_accepted": 0}')))).stats
    assert plain.spec_mode is None, "a server that checked no guesses did not speculate"


BAD_USAGE = {"prompt_tokens": -3, "completion_tokens": "12", "total_tokens": float("nan"),
             "prompt_tokens_details": {"cached_tokens": -1}}
BAD_TIMINGS = {"prompt_ms": -5, "predicted_ms": float("nan"), "predicted_per_second": "fast"}


def _finish(reason: str = "stop", **delta) -> str:
    return ("data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                                   "usage": BAD_USAGE, "timings": BAD_TIMINGS}) + "\n\ndata: [DONE]\n\n")


def _said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "shown as not reported" in line]


def test_a_reply_with_bad_usage_says_so_in_one_line_naming_each_figure(server):
    srv = server(_stream(_sse(HELLO, tail="") + _finish()))
    r = _ask("--no-save", "--endpoint", srv.base + "/v1", "hi")
    assert r.returncode == 0 and r.stdout.strip() == "Hello", r.stderr
    said = _said(r.stderr)
    assert len(said) == 1, r.stderr  # it was a line for each figure, four or five a reply
    line = said[0]
    for words in ("prompt_tokens = -3 (negative)", "completion_tokens = '12' (a string, not a number)",
                  "cached_tokens = -1 (negative)", "prompt_ms = -5 (negative)",
                  "predicted_ms = nan (not a finite number)",
                  "predicted_per_second = 'fast' (a string"):
        assert words in line, line
    assert line.startswith("llamadesk: the server reported ") and "Traceback" not in r.stderr


def test_each_reply_of_a_turn_says_its_bad_figures_once(server):
    """Two replies (a calculator call, then the answer from its result): two lines, one each."""
    posts: list[int] = []
    call = {"index": 0, "id": "c1", "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}}

    def post(h):
        if h.command != "POST":  # the probe's other questions
            return answer(h, 404, "{}")
        posts.append(1)
        if len(posts) == 1:
            return answer(h, 200, _finish("tool_calls", tool_calls=[call]), "text/event-stream")
        answer(h, 200, _sse(HELLO, tail="") + _finish(), "text/event-stream")
    srv = server(post)
    r = _ask("--no-save", "--builtin-tools", "--endpoint", srv.base + "/v1", "what is 2+2?")
    assert r.returncode == 0 and len(posts) == 2, r.stderr
    said = _said(r.stderr)
    assert len(said) == 2 and all("prompt_tokens = -3" in line for line in said), r.stderr


def test_usage_that_is_not_an_object_is_named_too(server):
    tail = ('data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": [1, 2]}\n\n'
            "data: [DONE]\n\n")
    notes: list[str] = []
    st = _reply(server(_stream(_sse(HELLO, tail="") + tail)), notes).stats
    assert st.prompt_tokens is None and st.error is None
    assert notes == ["the server reported usage = [1, 2] (a list, not an object): shown as not reported"]
