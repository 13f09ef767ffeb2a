"""The remote engine against real servers: the figures they report, and nothing invented."""

from __future__ import annotations

import httpx
import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.engine.events import FirstToken, TextDelta
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.server import LLAMA_SERVER, OPENAI

GREEDY = GenerationSettings(max_tokens=12, temperature=0, ignore_eos=True)


def test_llama_server_reply_carries_the_servers_timings_beside_the_clients(llama_server_v1):
    eng = RemoteChatEngine(Endpoint.parse(llama_server_v1))
    events = []
    try:
        assert eng.info.kind == LLAMA_SERVER
        assert eng.n_ctx == 2048  # one slot's share of -c 16384 over 8 slots
        r = eng.reply([], "Name three colours.", GREEDY, on_event=events.append)
    finally:
        eng.close()
    st = r.stats
    assert r.text and st.stop_reason == "length" and st.error is None
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == r.text
    assert any(isinstance(e, FirstToken) for e in events)
    # Server-side: the timings llama-server sent; client-side: measured here.
    assert st.decode_tokens == 12 and st.prompt_tokens > 5
    assert st.prefill_s is not None and st.decode_s is not None and st.decode_tok_s > 0
    assert st.prefill_tok_s > 0 and st.prefill_tokens + st.cached_tokens == st.prompt_tokens
    assert st.ttft_s >= st.prefill_s * 0.5 and st.total_s >= st.ttft_s
    assert st.wall_decode_tok_s is not None and st.wall_decode_tok_s > 0
    assert st.kv_used == st.prompt_tokens + 12 and st.n_ctx == 2048
    assert st.source == f"llama-server at 127.0.0.1:{llama_server_v1.split(':')[2].split('/')[0]}"
    assert "server prefill" in st.summary() and "not reported" not in st.summary()


def test_second_turn_reports_the_servers_cached_prefix(llama_server_v1):
    eng = RemoteChatEngine(Endpoint.parse(llama_server_v1))
    try:
        first = eng.reply([], "Tell me about the sea in one sentence.", GREEDY)
        history = [MessageBody("user", "Tell me about the sea in one sentence."),
                   MessageBody("assistant", first.text)]
        second = eng.reply(history, "And the mountains?", GREEDY)
    finally:
        eng.close()
    assert second.stats.cached_tokens > 0
    assert second.stats.cached_tokens <= first.stats.prompt_tokens + first.stats.decode_tokens
    assert second.stats.prefill_tokens < second.stats.prompt_tokens


def test_a_server_without_timings_gets_client_figures_and_not_reported(py_server):
    eng = RemoteChatEngine(Endpoint.parse(py_server.base + "/v1"), prompt_format="transcript")
    try:
        assert eng.info.kind == OPENAI
        r = eng.reply([], "Say hello.", GenerationSettings(max_tokens=8, temperature=0))
    finally:
        eng.close()
    st = r.stats
    assert r.text and st.error is None
    assert st.ttft_s is not None and st.total_s >= st.ttft_s
    assert st.prefill_s is None and st.decode_s is None and st.decode_tok_s is None
    assert st.prefill_tok_s is None and st.kv_used is None
    summary = st.summary()
    assert "prefill not reported" in summary and "received at" in summary


def test_stop_closes_the_stream_and_the_server_frees_the_slot(llama_server_v1, llama_server):
    from app.engine.control import CancelToken

    eng = RemoteChatEngine(Endpoint.parse(llama_server_v1))
    cancel = CancelToken()
    seen = []

    def on_event(ev):
        if isinstance(ev, TextDelta):
            seen.append(ev)
            if len(seen) == 3:
                cancel.cancel()
    try:
        r = eng.reply([], "Write a long story.", GenerationSettings(max_tokens=1500, temperature=0,
                                                                    ignore_eos=True),
                      on_event=on_event, cancel=cancel)
    finally:
        eng.close()
    assert r.stats.stop_reason == "cancelled" and r.stats.error is None
    assert r.text.startswith("".join(d.text for d in seen[:3])) and len(seen) < 1500
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        slots = httpx.get(llama_server.base + "/slots", timeout=5).json()
        if not any(s["is_processing"] for s in slots):
            break
        time.sleep(0.1)
    assert not any(s["is_processing"] for s in slots), "the server kept generating after Stop"


@pytest.mark.parametrize("bad", ["", "localhost:8080", "ftp://x/v1", "http://", "http://u:p@h/v1",
                                 "http://host:99999/v1"])
def test_bad_urls_are_refused_in_one_line_before_any_request(bad):
    from app.remote.errors import EndpointConfigError

    with pytest.raises(EndpointConfigError) as e:
        Endpoint.parse(bad)
    assert "\n" not in str(e.value) and str(e.value)


def test_a_bare_host_gets_v1_and_the_key_is_masked():
    ep = Endpoint.parse("http://box:8080/", api_key="sk-abcdefghijklmnop")
    assert ep.base_url == "http://box:8080/v1" and ep.root == "http://box:8080"
    assert "abcdefghijkl" not in ep.masked() and ep.masked().endswith("mnop")
    assert "sk-abcdefghijklmnop" not in repr(ep)
