"""Schemas and grammars that used to take the server's engine down for everyone: each is refused
or fails its own request with a clear error, and the same client is served right after.

Through the official openai client against a real `llamadesk serve` on the bundled model.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time

import httpx
import openai
import pytest

from app.commands.serve import GRACE_S
from tests.serve.conftest import MODEL_ID, start_serve

ASK = [{"role": "user", "content": "Write the value."}]
RECURSIVE = {"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}},
                             "required": ["c"]}}, "$ref": "#/$defs/n"}
CYCLE = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
# Compiles, passes the first tokens, and exhausts LLGuidance's lexer when the reply reaches "code".
LATE = {"type": "object", "additionalProperties": False, "required": ["name", "code"],
        "properties": {"name": {"type": "string", "minLength": 12, "maxLength": 16},
                       "code": {"type": "string", "pattern": "^a{1000000}$"}}}

COLOUR = {"type": "object", "required": ["colour"], "additionalProperties": False,
          "properties": {"colour": {"enum": ["red", "blue"]}}}


def _schema(schema) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def _still_served(client) -> None:
    r = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=4, temperature=0)
    assert r.choices[0].message.content and r.usage.completion_tokens > 0
    r = client.chat.completions.create(model=MODEL_ID, messages=ASK, max_tokens=20, temperature=0,
                                       response_format=_schema(COLOUR))
    assert json.loads(r.choices[0].message.content)["colour"] in ("red", "blue")


@pytest.mark.parametrize("schema, named", [
    ({"type": "string", "pattern": "^a{1000000}$"}, "lexer error"),
    (RECURSIVE, "$ref '#/$defs/n' recurses without end"),
    ({"$ref": "#"}, "$ref '#' recurses without end"),
    (CYCLE, "$ref '#/$defs/a' recurses without end"),
], ids=["huge-repeat", "required-recursion", "self-ref", "two-step-cycle"])
def test_a_schema_that_would_blow_up_the_matcher_is_a_400_before_any_token(client, schema, named):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=ASK, max_tokens=30,
                                       response_format=_schema(schema))
    err = e.value.body  # "cannot be enforced": refused up front, where a reply's failure says how far it got
    assert err["param"] == "response_format" and "cannot be enforced" in err["message"]
    assert named in err["message"] and "\n" not in err["message"]
    _still_served(client)


@pytest.mark.parametrize("field, value", [("grammar", 'root ::= "a" root'),
                                          ("json_schema", {"type": "string", "pattern": "^b{300000}$"})])
def test_llama_servers_own_fields_are_refused_the_same_way(serve, client, field, value):
    """A GBNF grammar that never ends, a pattern past the lexer's limits, in the fields
    llama-server's clients send."""
    r = httpx.post(serve.base + "/v1/completions", timeout=60, json={
        "model": MODEL_ID, "prompt": "Say a", "max_tokens": 10, field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field and "cannot be enforced" in r.json()["error"]["message"]
    _still_served(client)


def test_a_constraint_that_fails_mid_reply_ends_that_reply_and_no_other(client):
    """Past the up-front probe, the matcher gives out while the reply is written: the client hears
    the error (a 400, or an error event in the stream), and the engine goes on."""
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=ASK, max_tokens=60, temperature=0,
                                       response_format=_schema(LATE))
    message = e.value.body["message"]
    assert "the constraint failed after" in message and "lexer error" in message
    stream = client.chat.completions.create(model=MODEL_ID, messages=ASK, max_tokens=60, temperature=0,
                                            response_format=_schema(LATE), stream=True)
    with pytest.raises(openai.APIError) as e2:
        for _ in stream:
            pass
    assert "the constraint failed after" in str(e2.value)
    _still_served(client)
    health = httpx.get(str(client.base_url).removesuffix("/v1/") + "/health", timeout=5)
    assert health.json()["status"] == "ok"


def test_sigterm_ends_the_server_while_a_whole_reply_is_still_being_written(model_path):
    """A request that would take a minute (or never end, on a wedged engine) cannot hold the
    server past its grace period: uvicorn alone would wait for it."""
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-serve-term-"), "--parallel", "1")
    answered: list = []

    def ask() -> None:
        try:
            answered.append(httpx.post(srv.base + "/v1/chat/completions", timeout=120, json={
                "model": MODEL_ID, "messages": ASK, "max_tokens": 2000, "ignore_eos": True}).status_code)
        except httpx.HTTPError as e:
            answered.append(type(e).__name__)

    asker = threading.Thread(target=ask)
    try:
        asker.start()
        deadline = time.monotonic() + 60
        while "llamadesk_slots_busy 1.0" not in httpx.get(srv.base + "/metrics", timeout=5).text:
            assert time.monotonic() < deadline, "the request never started"
            time.sleep(0.2)
        t = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(60)
        took = time.monotonic() - t
    finally:
        srv.stop()
        asker.join(30)
    assert code in (0, -signal.SIGTERM), f"exit {code}: {srv.tail()}"
    assert took < GRACE_S + 10, f"{took:.1f} s after SIGTERM: {srv.tail()}"
    assert answered and answered[0] != 200, "the 2000-token reply was cut, not waited for"
