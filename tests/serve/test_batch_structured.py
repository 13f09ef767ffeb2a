"""A batch mixing plain, json_schema and tools lines, through the Batch API and the official
openai client: each line is answered as asked, exactly as the same request sent online would be,
and a line with a parameter that cannot be honoured gets an error record naming it."""

from __future__ import annotations

import io
import json

import jsonschema

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

LINES = [
    _line("plain", "Name a colour."),
    _line("schema", "Describe a teacher called Ann.", max_tokens=budget(LONGEST_PERSON),
          response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}),
    # Parallel calls allowed (OpenAI's default): one to MAX_PARALLEL calls, each valid for its tool.
    _line("tools", "What is the weather in Oslo?", tools=[TOOL], tool_choice="required",
          max_tokens=budget(LONGEST_CALLS)),
    _line("n2", "Name a colour.", n=2),
    _line("image", "", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://example.com/cat.png"}}]}]),
    _line("unenforceable", "List things.",
          response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
              "type": "array", "uniqueItems": True}}}),
]


def test_each_line_is_answered_as_asked_and_the_rest_refused_naming_why(client):
    data = ("\n".join(LINES) + "\n").encode()
    f = client.files.create(file=("mixed.jsonl", io.BytesIO(data)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    done, _ = _wait(client, b.id)
    counts = done.request_counts
    assert done.status == "completed" and (counts.completed, counts.failed) == (3, 3)
    lines = client.files.content(done.output_file_id).text.splitlines()
    out = {o["custom_id"]: o for o in map(json.loads, lines)}
    assert out["plain"]["response"]["body"]["choices"][0]["message"]["content"]
    person = out["schema"]["response"]["body"]["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(person), PERSON)
    choice = out["tools"]["response"]["body"]["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert 1 <= len(calls) <= MAX_PARALLEL
    for call in calls:
        assert call["function"]["name"] == "get_weather"
        jsonschema.validate(json.loads(call["function"]["arguments"]), TOOL["function"]["parameters"])
    errs = {e["custom_id"]: e["error"]["message"]
            for e in map(json.loads, client.files.content(done.error_file_id).text.splitlines())}
    assert "one choice" in errs["n2"] and "own line" in errs["n2"]
    assert "image_url" in errs["image"] and "text only" in errs["image"]
    assert "uniqueItems" in errs["unenforceable"]
