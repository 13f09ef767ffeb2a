"""A batch mixing plain, json_schema, tools, penalties, n and logprobs lines, through the Batch API
and the official openai client: each line is answered as asked, in the body the same request sent
online gets (the client's own ChatCompletion reads it), and a line with a parameter that cannot be
honoured gets an error record naming it. Nothing in a line is silently dropped."""

from __future__ import annotations

import io
import json

import jsonschema
from openai.types.chat import ChatCompletion

from app.openai_compat.tools import MAX_PARALLEL
from tests.serve.conftest import MODEL_ID
from tests.serve.test_batch_api import _wait
from tests.serve.test_openai_surface import budget

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city today.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city"],
                   "properties": {"city": {"type": "string", "maxLength": 24}}}}}


def _line(cid: str, text: str, **body) -> str:
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": MODEL_ID, "max_tokens": 60, "temperature": 0,
                                "messages": [{"role": "user", "content": text}], **body}})


# The longest replies the constraints allow, for a budget they always finish in (test_openai_surface).
LONGEST_PERSON = {"name": "\x01" * 24, "age": 120}
LONGEST_CALLS = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "\x01" * 24}}] * MAX_PARALLEL}
CATS = "Write the word cat thirty times, separated by spaces."
PENALTIES = {"frequency_penalty": 2.0, "presence_penalty": 2.0}

LINES = [
    _line("plain", "Name a colour."),
    _line("schema", "Describe a teacher called Ann.", max_tokens=budget(LONGEST_PERSON),
          response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}),
    # Parallel calls allowed (OpenAI's default): one to MAX_PARALLEL calls, each valid for its tool.
    _line("tools", "What is the weather in Oslo?", tools=[TOOL], tool_choice="required",
          max_tokens=budget(LONGEST_CALLS)),
    _line("cats", CATS, max_tokens=24),
    _line("cats-penalised", CATS, max_tokens=24, **PENALTIES),
    _line("n3", "Name a colour.", n=3, temperature=1.0, seed=7, max_tokens=12),
    _line("logprobs", "Name a colour.", logprobs=True, top_logprobs=2, max_tokens=8),
    _line("image", "", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://example.com/cat.png"}}]}]),
    _line("unenforceable", "List things.",
          response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
              "type": "array", "uniqueItems": True}}}),
    _line("penalty-range", CATS, presence_penalty=5),
    _line("bias-past-vocabulary", "Name a colour.", logit_bias={"999999999": 5}),
]
ANSWERED = {"plain", "schema", "tools", "cats", "cats-penalised", "n3", "logprobs"}


def test_each_line_is_answered_as_asked_and_the_rest_refused_naming_why(client):
    data = ("\n".join(LINES) + "\n").encode()
    f = client.files.create(file=("mixed.jsonl", io.BytesIO(data)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    done, _ = _wait(client, b.id)
    counts = done.request_counts
    assert done.status == "completed", done.errors
    assert (counts.total, counts.completed, counts.failed) == (len(LINES), len(ANSWERED),
                                                               len(LINES) - len(ANSWERED))
    lines = client.files.content(done.output_file_id).text.splitlines()
    # Read by the client's own ChatCompletion: the body the same request sent online gets.
    out = {o["custom_id"]: ChatCompletion.model_validate(o["response"]["body"])
           for o in map(json.loads, lines)}
    assert set(out) == ANSWERED
    assert out["plain"].choices[0].message.content

    person = out["schema"].choices[0].message.content
    jsonschema.validate(json.loads(person), PERSON)

    choice = out["tools"].choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert 1 <= len(calls) <= MAX_PARALLEL
    for call in calls:
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), TOOL["function"]["parameters"])

    # Penalties change what greedy decoding picks: the same prompt reads otherwise with them.
    assert out["cats"].choices[0].message.content != out["cats-penalised"].choices[0].message.content

    n3 = out["n3"]
    assert [c.index for c in n3.choices] == [0, 1, 2] and all(c.message.content for c in n3.choices)
    assert n3.usage.completion_tokens >= 3 and n3.usage.prompt_tokens == out["plain"].usage.prompt_tokens

    lp = out["logprobs"].choices[0]
    assert lp.logprobs is not None and lp.logprobs.content
    for t in lp.logprobs.content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 2
    shown = b"".join(bytes(t.bytes) for t in lp.logprobs.content).decode()
    assert shown.strip() == lp.message.content.strip()  # the tokens are the reply's own

    errs = {e["custom_id"]: e["error"]["message"]
            for e in map(json.loads, client.files.content(done.error_file_id).text.splitlines())}
    assert "image_url" in errs["image"] and "text only" in errs["image"]
    assert "uniqueItems" in errs["unenforceable"]
    assert "presence_penalty" in errs["penalty-range"] and "between -2 and 2" in errs["penalty-range"]
    assert "logit_bias names token 999999999" in errs["bias-past-vocabulary"]
