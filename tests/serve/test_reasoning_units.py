"""The server's thinking parts that need no model: a request's fields read as llama-server reads
them, the Responses stream's items in their order, and the /metrics counter."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.engine.events import ReasoningDelta, TextDelta
from app.engine.sampling import GenerationSettings
from app.openai_compat.params import parse
from app.openai_compat.refusal import RequestError
from app.serve.metrics import ServeMetrics
from app.serve.responses_stream import ItemStream
from tests.serve.test_metrics_names import host, result

BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def parsed(**body):
    return parse({**BASE, **body}, "chat", GenerationSettings(think_budget=7))


@pytest.mark.parametrize(("body", "think", "budget", "split", "kwargs"), [
    ({}, None, 7, None, {}),
    ({"reasoning_format": "none"}, None, 7, False, {}),
    ({"reasoning_format": "auto", "reasoning_budget_tokens": -1}, None, 7, True, {}),
    ({"reasoning_budget_tokens": 0}, None, 0, None, {}),
    ({"thinking_budget_tokens": 12.0}, None, 12, None, {}),
    ({"chat_template_kwargs": {"enable_thinking": False, "custom": [1]}}, False, 7, None, {"custom": [1]}),
    ({"chat_template_kwargs": {"reasoning_effort": "high"}}, "high", 7, None, {}),
    ({"reasoning_effort": "none"}, False, 7, None, {}),
    ({"reasoning_effort": "minimal"}, "low", 7, None, {}),
    # The top-level field is OpenAI's own, read last: it says what the client asked of the model.
    ({"reasoning_effort": "medium", "chat_template_kwargs": {"enable_thinking": False}},
     "medium", 7, None, {}),
])
def test_the_thinking_fields_become_settings_and_an_ask(body, think, budget, split, kwargs):
    p = parsed(**body)
    assert p.settings.think == think and p.settings.think_budget == budget
    assert p.reasoning.split == split and p.reasoning.kwargs == kwargs
    p.settings.validate()


@pytest.mark.parametrize("body", [
    {"chat_template_kwargs": {"enable_thinking": 1}},
    {"chat_template_kwargs": {"enable_thinking": "false"}},
    {"chat_template_kwargs": {"reasoning_effort": 3}},
    {"chat_template_kwargs": {"not a name": 1}},
    {"chat_template_kwargs": ["enable_thinking"]},
    {"reasoning_format": "deepseek-legacy"},
    {"reasoning_format": None, "reasoning_budget_tokens": True},
    {"reasoning_budget_tokens": 2**31},
])
def test_a_bad_thinking_field_is_refused_naming_it(body):
    with pytest.raises(RequestError) as e:
        parsed(**body)
    assert e.value.status == 400 and e.value.param in body and "\n" not in e.value.message


def test_completions_take_no_thinking_fields():
    with pytest.raises(RequestError) as e:
        parse({"model": "m", "prompt": "hi", "reasoning_format": "none"}, "completion", GenerationSettings())
    assert e.value.param == "reasoning_format"


def test_an_earlier_reply_s_reasoning_reaches_the_template():
    p = parsed(messages=[{"role": "user", "content": "a"},
                         {"role": "assistant", "content": "b", "reasoning_content": "why"},
                         {"role": "user", "content": "c"}])
    assert [m.reasoning for m in p.messages or ()] == ["", "why", ""]


def _events(stream) -> list[dict]:
    return [json.loads(e["data"]) for e in stream]


def test_the_responses_stream_closes_the_reasoning_before_the_message_opens():
    items = ItemStream(streaming_text=True)
    out = _events(items.delta(ReasoningDelta("think", 1, 0.0)))
    out += _events(items.delta(ReasoningDelta("ing", 2, 0.0)))
    out += _events(items.delta(TextDelta("Paris.", 3, 0.0)))
    final = [{"type": "reasoning", "id": items.reasoning_id, "summary": [],
              "content": [{"type": "reasoning_text", "text": "thinking"}], "status": "completed"},
             {"type": "message", "id": items.message_id, "status": "completed", "role": "assistant",
              "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]}]
    out += _events(items.finish(final))
    kinds = [(e["type"], e.get("output_index")) for e in out]
    assert kinds == [
        ("response.output_item.added", 0), ("response.content_part.added", 0),
        ("response.reasoning_text.delta", 0), ("response.reasoning_text.delta", 0),
        ("response.reasoning_text.done", 0), ("response.content_part.done", 0),
        ("response.output_item.done", 0),
        ("response.output_item.added", 1), ("response.content_part.added", 1),
        ("response.output_text.delta", 1),
        ("response.output_text.done", 1), ("response.content_part.done", 1), ("response.output_item.done", 1)]
    assert out[4]["text"] == "thinking" and out[6]["item"] == final[0]
    assert [e["sequence_number"] for e in out] == list(range(len(out)))


def test_a_plain_reply_streams_its_message_at_index_0():
    items = ItemStream(streaming_text=True)
    out = _events(items.delta(TextDelta("Hi", 1, 0.0)))
    assert [(e["type"], e["output_index"]) for e in out] == [
        ("response.output_item.added", 0), ("response.content_part.added", 0),
        ("response.output_text.delta", 0)]


def test_metrics_count_reasoning_tokens():
    m = ServeMetrics(host())  # type: ignore[arg-type]
    a, b = result(), result()
    a.stats.reasoning_tokens = 3
    for r in (a, b):
        m.observe(r)
    fams = {f.name: f for f in text_string_to_metric_families(m.render().decode())}
    fam = fams["llamadesk_reasoning_tokens"]
    assert fam.type == "counter"
    assert [s.value for s in fam.samples if s.name == "llamadesk_reasoning_tokens_total"] == [3.0]
