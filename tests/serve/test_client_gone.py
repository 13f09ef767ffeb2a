"""A client that leaves before its whole (non-streaming) reply is ready frees its slot at once, as
a streaming one does; and the decode-rate gauge reads 0 once nothing decodes. The official
openai client, giving up on a long reply, against a real `llamadesk serve`."""

from __future__ import annotations

import re
import time

import httpx
import openai
import pytest

from tests.serve.conftest import MODEL_ID, openai_client

LONG = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 900,
        "extra_body": {"ignore_eos": True}}


def _gauge(base: str, name: str) -> float:
    text = httpx.get(base + "/metrics", timeout=5).text
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def _until_idle(base: str, within: float) -> float:
    """Seconds until no slot is busy; fails past `within`."""
    t = time.monotonic()
    while _gauge(base, "llamadesk_slots_busy") > 0:
        assert time.monotonic() - t < within, "a slot stayed busy for a client that had gone"
        time.sleep(0.1)
    return time.monotonic() - t


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_whole_reply_whose_client_left_stops_decoding(serve, api):
    """900 tokens take this machine half a minute or more; the slot is free within seconds of the
    client giving up (before, it decoded on for nobody)."""
    with openai_client(serve).with_options(timeout=1.5) as c:
        with pytest.raises(openai.APITimeoutError):
            if api == "chat":
                c.chat.completions.create(model=MODEL_ID, **LONG)
            else:  # the Responses API has no ignore_eos: a story the model tells at length
                c.responses.create(model=MODEL_ID, input="Tell me a long story about a dragon.",
                                   max_output_tokens=900, temperature=0)
    _until_idle(serve.base, within=10)
    metrics = httpx.get(serve.base + "/metrics", timeout=5).text
    assert re.search(r'llamadesk_requests_total\{[^}]*outcome="499"[^}]*\} [1-9]', metrics), metrics[:2000]


def test_the_decode_rate_gauge_reads_zero_when_nothing_decodes(serve, client):
    with client.chat.completions.create(model=MODEL_ID, stream=True, **LONG) as stream:
        for i, _ in enumerate(stream):
            if i == 20:
                assert _gauge(serve.base, "llamadesk_generation_tokens_per_second") > 0
                break
    _until_idle(serve.base, within=10)
    client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert _gauge(serve.base, "llamadesk_slots_busy") == 0
    assert _gauge(serve.base, "llamadesk_generation_tokens_per_second") == 0
