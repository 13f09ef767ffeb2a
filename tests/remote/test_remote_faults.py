"""Faults injected for real, on real sockets: each ends in one line naming the endpoint
and the reason, and a reply cut mid-stream keeps what was shown."""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.engine.events import TextDelta
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.errors import EndpointConfigError, RemoteError
from tests.remote.servers import FaultServer, answer, free_port, relay, start_llama_server

LONG = GenerationSettings(max_tokens=200, temperature=0, ignore_eos=True)
MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})


@pytest.fixture
def fault():
    servers = []

    def make(behave, upstream=None):
        s = FaultServer(behave, upstream)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


def _open(base: str, **kw) -> RemoteChatEngine:
    return RemoteChatEngine(Endpoint.parse(base + "/v1", **kw))


def _one_model(fault, answer_post):
    """A server that lists one model and answers every completion request with answer_post(h)."""
    def behave(h):
        if h.path.endswith("/models"):
            return answer(h, 200, MODELS)
        answer_post(h)
    return fault(behave)


def _reply(srv):
    """One reply from `srv` through the remote engine (what it raises, raised)."""
    eng = _open(srv.base)
    try:
        return eng.reply([], "hi", LONG)
    finally:
        eng.close()


def _one_line_error(exc_info, base: str, *words: str) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg and msg.startswith(base), msg
    for w in words:
        assert w in msg, msg
    return msg


def test_connection_refused():
    base = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RemoteError) as e:
        _open(base)
    _one_line_error(e, base, "connection refused")


def test_an_html_page_is_not_an_openai_server(fault):
    srv = fault(lambda h: answer(h, 200, "<html><body>Router login</body></html>", "text/html"))
    with pytest.raises(RemoteError) as e:
        _open(srv.base)
    _one_line_error(e, srv.base, "not an OpenAI-compatible server", "HTML")


def test_a_json_answer_without_a_model_list_is_not_an_openai_server(fault):
    srv = fault(lambda h: answer(h, 200, '{"hello": "world"}'))
    with pytest.raises(RemoteError) as e:
        _open(srv.base)
    _one_line_error(e, srv.base, "no 'data' list")


@pytest.mark.parametrize("key", [None, "sk-secret-key-1234567890"])
def test_401_says_whether_a_key_is_missing_or_refused_and_never_shows_it(fault, key):
    err = json.dumps({"error": {"message": "Invalid API Key", "type": "invalid_request_error"}})
    srv = fault(lambda h: answer(h, 401, err))
    with pytest.raises(RemoteError) as e:
        _open(srv.base, api_key=key)
    msg = _one_line_error(e, srv.base, "HTTP 401", "Invalid API Key")
    if key is None:
        assert "wants an API key" in msg and "--api-key-env" in msg
    else:
        assert "refused the API key" in msg and key not in msg and "7890" in msg


def test_500_and_a_404_model_name_the_status_and_the_servers_words(fault):
    oom = json.dumps({"error": {"message": "CUDA out of memory"}})
    srv = _one_model(fault, lambda h: answer(h, 500, oom))
    with pytest.raises(RemoteError) as e:
        _reply(srv)
    _one_line_error(e, srv.base, "server error (HTTP 500", "CUDA out of memory")

    with pytest.raises(EndpointConfigError) as e2:
        RemoteChatEngine(Endpoint.parse(srv.base + "/v1"), model="llama-70b")
    assert "no model 'llama-70b'" in str(e2.value) and "m" in str(e2.value)


def test_429_with_retry_after_is_waited_out_and_said(fault, llama_server):
    state = {"posts": 0}

    def behave(h):
        if h.command == "POST":
            state["posts"] += 1
            if state["posts"] == 1:
                return answer(h, 429, json.dumps({"error": {"message": "slow down"}}),
                              headers={"Retry-After": "1"})
        relay(h, srv)
    srv = fault(behave, llama_server.base)
    notes = []
    eng = RemoteChatEngine(Endpoint.parse(srv.base + "/v1"), notice=notes.append)
    try:
        r = eng.reply([], "Say hi.", GenerationSettings(max_tokens=6, temperature=0, ignore_eos=True))
    finally:
        eng.close()
    assert state["posts"] == 2 and r.text and r.stats.error is None
    assert len(notes) == 1 and "HTTP 429" in notes[0] and "retrying in 1 s" in notes[0]


def test_429_asking_for_an_hour_is_reported_not_slept_through(fault):
    srv = _one_model(fault, lambda h: answer(h, 429, json.dumps({"error": {"message": "quota"}}),
                                             headers={"Retry-After": "3600"}))
    with pytest.raises(RemoteError) as e:
        _reply(srv)
    _one_line_error(e, srv.base, "busy (HTTP 429", "retry after 3600 s")


def test_malformed_sse_ends_the_reply_with_what_was_shown(fault):
    good = json.dumps({"choices": [{"index": 0, "delta": {"content": "Hello"}}]})

    body = f": keep-alive\n\ndata: {good}\n\ndata: {{not json\n\n"
    r = _reply(_one_model(fault, lambda h: answer(h, 200, body, "text/event-stream")))
    assert r.text == "Hello" and r.stats.stop_reason == "error"
    assert "malformed stream" in r.stats.error


def test_multi_line_data_and_comments_parse_as_sse(fault):
    """One event's JSON split over two data: lines (joined with a newline, per the SSE spec)."""
    body = (': ping\n\ndata: {"choices": [{"index": 0,\ndata: "delta": {"content": "Hi"}}]}\n\n'
            'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
            "data: [DONE]\n\n")
    r = _reply(_one_model(fault, lambda h: answer(h, 200, body, "text/event-stream")))
    assert r.text == "Hi" and r.stats.stop_reason == "stop" and r.stats.error is None


def _text_event(line: str) -> bool:
    """A stream line that is an event carrying reply text."""
    if not line.startswith("data:") or line[5:].strip() == "[DONE]":
        return False
    choices = json.loads(line[5:]).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def test_a_stalled_stream_gives_up_after_the_stall_timeout_and_keeps_the_text(fault, llama_server):
    """llama-server's own bytes, replayed: a first reply through the proxy (the usual stall timeout)
    records the probe's answers and the stream up to its third event with text, then is cut; the
    second, with a 1 s stall timeout, is sent all of that at once and then nothing until the test
    ends. So its 1 s of silence starts after the text has arrived, however slowly the model wrote it."""
    got: dict[str, tuple[int, str, bytes]] = {}  # GET path -> the upstream's answer
    head: list[bytes] = []  # the POST's status line and first stream lines
    replay = threading.Event()

    def record(h):
        with httpx.Client(timeout=120) as c:
            if h.command == "GET":
                r = c.get(srv.upstream + h.path)
                got[h.path] = (r.status_code, r.content, r.headers.get("content-type", "application/json"))
                return answer(h, *got[h.path])
            with c.stream("POST", srv.upstream + h.path, content=h.body,
                          headers={"content-type": h.headers.get("content-type", "application/json")}) as r:
                got["POST"] = (r.status_code, b"", r.headers.get("content-type", "text/event-stream"))
                h.send_response(r.status_code)
                h.send_header("Content-Type", got["POST"][2])
                h.end_headers()
                texts = 0
                for line in r.iter_lines():
                    head.append(line.encode() + b"\n")
                    h.wfile.write(head[-1])
                    h.wfile.flush()
                    texts += _text_event(line)
                    if texts >= 3 and line == "":  # that event's blank line: it is whole
                        break
        h.connection.shutdown(socket.SHUT_RDWR)

    def play(h):
        if h.command == "GET":
            return answer(h, *got.get(h.path, (404, b"{}", "application/json")))
        h.send_response(got["POST"][0])
        h.send_header("Content-Type", got["POST"][2])
        h.end_headers()
        h.wfile.write(b"".join(head))
        h.wfile.flush()
        srv.release.wait()  # the stall: no byte more until the fixture stops the server

    srv = fault(lambda h: play(h) if replay.is_set() else record(h), llama_server.base)
    eng = _open(srv.base)
    try:
        first = eng.reply([], "Tell me a story.", LONG)
    finally:
        eng.close()
    assert first.text and any(_text_event(b.decode().rstrip("\n")) for b in head)

    replay.set()
    eng = RemoteChatEngine(Endpoint.parse(srv.base + "/v1", stall_s=1.0))
    seen = []
    try:
        r = eng.reply([], "Tell me a story.", LONG,
                      on_event=lambda ev: seen.append(ev) if isinstance(ev, TextDelta) else None)
    finally:
        eng.close()
    assert r.stats.stop_reason == "error" and "no data from the server for 1 s" in r.stats.error
    assert seen and r.text == "".join(d.text for d in seen) == first.text


def test_a_cut_stream_keeps_the_text_and_says_it_ended_early(fault, llama_server):
    srv = fault(lambda h: relay(h, srv, cut_after=5) if h.command == "POST" else relay(h, srv),
                llama_server.base)
    eng = _open(srv.base)
    try:
        r = eng.reply([], "Tell me a story.", LONG)
    finally:
        eng.close()
    assert r.text and r.stats.stop_reason == "error"
    assert "ended before the reply finished" in r.stats.error or "connection" in r.stats.error


def test_killing_the_server_mid_stream_keeps_the_text(model_path):
    srv = start_llama_server(model_path, slots=1, ctx=2048)
    eng = RemoteChatEngine(Endpoint.parse(srv.base + "/v1"))
    seen = []

    def on_event(ev):
        if isinstance(ev, TextDelta):
            seen.append(ev.text)
            if len(seen) == 3:
                srv.kill()
    try:
        r = eng.reply([], "Tell me a story.", GenerationSettings(max_tokens=500, temperature=0,
                                                                 ignore_eos=True), on_event=on_event)
    finally:
        eng.close()
        srv.stop()
    assert r.stats.stop_reason == "error" and r.stats.error
    assert r.text.startswith("".join(seen[:3])) and len(r.text) > 0
