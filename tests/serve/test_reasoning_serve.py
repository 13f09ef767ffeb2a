"""A thinking model behind `llamadesk serve`, read with the official openai client and held against
llama.cpp's own llama-server (`--jinja --reasoning-format deepseek`) on the same GGUF copy.

The bundled model is given a DeepSeek R1 distill's chat template (tests/gguf_templates.py). This
template's generation prompt opens `<think>` when `enable_thinking` is on, so the reply starts inside
its reasoning; the base model never closes it itself, so a grammar holds each reply to the shape (or
the budget ends the reasoning). The two servers sample differently, so their texts are never
compared: only where each puts the reasoning and the answer, and the fields they send."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.reasoning import BUDGET_MESSAGE
from tests.gguf_templates import with_chat_template
from tests.remote.servers import start_llama_server
from tests.serve.conftest import MODEL_ID, openai_client, start_serve
from tests.serve.harness import run_batch

R1 = Path(__file__).parent.parent / "data" / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
R1_ID = "r1.gguf"
# The reply after the prompt's `<think>\n`: a few lowercase words, the end tag, a short sentence.
THINKING = r'''root ::= word (" " word){2,3} "\n</think>\n\n" [A-Z] [a-z]{2,8} (" " [a-z]{2,8}){1,3} "."
word ::= [a-z]{3,6}
'''
# Past any reasoning THINKING allows (4 words of 6 letters and the end tag), so only a free reply
# (the Responses API takes no grammar) is cut by `ours`'s --reasoning-budget.
SERVER_BUDGET = 40
ANSWER = r'''root ::= [A-Z] [a-z]{2,8} (" " [a-z]{2,8}){1,3} "."
'''
ON = {"enable_thinking": True}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def r1_model(model_path, tmp_path_factory) -> Path:
    return with_chat_template(model_path, tmp_path_factory.mktemp("r1") / R1_ID, R1.read_text())


@pytest.fixture(scope="module")
def ours(r1_model):
    srv = start_serve(r1_model, tempfile.mkdtemp(prefix="llamadesk-reasoning-"), "--parallel", "2",
                      "--reasoning-budget", str(SERVER_BUDGET))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def theirs(r1_model):
    srv = start_llama_server(r1_model, slots=2, ctx=4096,
                             extra=("--jinja", "--reasoning-format", "deepseek"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def both(ours, theirs):
    with openai_client(ours) as a, openai_client(theirs) as b:
        yield {"llamadesk": (a, R1_ID), "llama-server": (b, R1_ID)}


def ask(client, model: str, grammar: str = THINKING, **extra):
    return client.chat.completions.create(model=model, messages=QUESTION, max_tokens=48, temperature=0,
                                          extra_body={"grammar": grammar, **extra})


def words(text: str) -> bool:
    return bool(text.split()) and all(w.isalpha() and w.islower() for w in text.split())


def sentence(text: str) -> bool:
    return text[:1].isupper() and text.endswith(".") and "</think>" not in text and "<think>" not in text


def test_a_whole_reply_is_split_as_llama_server_splits_it(both):
    shapes = {}
    for name, (client, model) in both.items():
        r = ask(client, model, chat_template_kwargs=ON)
        m = r.choices[0].message
        reasoning = (m.model_extra or {}).get("reasoning_content")
        assert reasoning is not None and words(reasoning), (name, reasoning)
        assert m.content is not None and sentence(m.content.strip()), (name, m.content)
        assert r.choices[0].finish_reason == "stop"
        shapes[name] = set(m.model_dump(exclude_none=True))
        if name == "llamadesk":  # llama-server does not count them
            thought = r.usage.completion_tokens_details.reasoning_tokens
            assert 0 < thought < r.usage.completion_tokens
    assert shapes["llamadesk"] == shapes["llama-server"] == {"role", "content", "reasoning_content"}


def stream(client, model: str, grammar: str = THINKING, **extra):
    chunks = list(client.chat.completions.create(
        model=model, messages=QUESTION, max_tokens=48, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"grammar": grammar, **extra}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    kinds = []  # per text delta: "r" (reasoning) or "a" (answer), never both in one
    for d in deltas:
        extra_fields = d.model_extra or {}
        r, a = extra_fields.get("reasoning_content"), d.content
        assert not (r and a), d
        kinds += ["r"] if r else ["a"] if a else []
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.content or "" for d in deltas)
    return chunks, kinds, reasoning, answer


def test_a_stream_sends_reasoning_deltas_then_answer_deltas_as_llama_server_does(both):
    for name, (client, model) in both.items():
        chunks, kinds, reasoning, answer = stream(client, model, chat_template_kwargs=ON)
        assert kinds and kinds[0] == "r" and "a" in kinds, (name, kinds)
        assert kinds == sorted(kinds, reverse=True), (name, kinds)  # every "r" before every "a"
        assert words(reasoning) and sentence(answer.strip()), (name, reasoning, answer)
        usage = chunks[-1].usage
        assert chunks[-1].choices == [] and usage is not None
        if name == "llamadesk":
            assert 0 < usage.completion_tokens_details.reasoning_tokens < usage.completion_tokens


def test_reasoning_format_none_leaves_the_whole_reply_in_content(both):
    for name, (client, model) in both.items():
        m = ask(client, model, chat_template_kwargs=ON, reasoning_format="none").choices[0].message
        assert not (m.model_extra or {}).get("reasoning_content"), name
        # The generation prompt's `<think>\n` too: the whole block, as a client would parse it.
        head, sep, tail = m.content.partition("</think>")
        assert head.startswith("<think>\n") and words(head.removeprefix("<think>")), (name, m.content)
        assert sep and sentence(tail.strip()), (name, m.content)
        _, kinds, reasoning, answer = stream(client, model, chat_template_kwargs=ON, reasoning_format="none")
        assert set(kinds) == {"a"} and not reasoning, (name, kinds)
        assert answer.startswith("<think>\n") and "</think>" in answer, (name, answer)


def test_thinking_switched_off_answers_at_once_on_both(both):
    for name, (client, model) in both.items():
        r = ask(client, model, ANSWER, chat_template_kwargs={"enable_thinking": False})
        m = r.choices[0].message
        assert not (m.model_extra or {}).get("reasoning_content") and sentence(m.content.strip()), name
        if name == "llamadesk":
            assert r.usage.completion_tokens_details.reasoning_tokens == 0


def test_reasoning_effort_turns_the_switch_of_a_template_without_levels(both):
    client, model = both["llamadesk"]
    m = ask(client, model, reasoning_effort="low").choices[0].message
    assert words(m.model_extra["reasoning_content"]) and sentence(m.content)
    m = ask(client, model, ANSWER, reasoning_effort="none").choices[0].message
    assert "reasoning_content" not in (m.model_extra or {}) and sentence(m.content)


def test_the_budget_ends_the_reasoning_and_the_answer_follows(both):
    client, model = both["llamadesk"]
    r = client.chat.completions.create(model=model, messages=QUESTION, max_tokens=40, temperature=0,
                                       extra_body={"reasoning_budget_tokens": 3})
    m = r.choices[0].message
    reasoning = m.model_extra["reasoning_content"]
    assert reasoning.endswith(BUDGET_MESSAGE.strip()), reasoning
    assert "</think>" not in (m.content or "")
    # 3 of its own, then the message and the end tag, forced token by token.
    thought = r.usage.completion_tokens_details.reasoning_tokens
    assert 3 < thought <= r.usage.completion_tokens and thought < 40


@pytest.mark.parametrize(("body", "param"), [
    ({"chat_template_kwargs": {"enable_thinking": "yes"}}, "chat_template_kwargs"),
    ({"chat_template_kwargs": "enable_thinking"}, "chat_template_kwargs"),
    ({"reasoning_format": "deepseek-legacy"}, "reasoning_format"),
    ({"reasoning_budget_tokens": -2}, "reasoning_budget_tokens"),
    ({"reasoning_budget_tokens": 2.5}, "reasoning_budget_tokens"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
])
def test_a_bad_thinking_field_is_a_400_naming_it(ours, body, param):
    r = httpx.post(ours.base + "/v1/chat/completions", timeout=30,
                   json={"model": R1_ID, "messages": QUESTION, "max_tokens": 2, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and "\n" not in err["message"], err


def test_a_model_without_a_thinking_format_answers_plain(serve, client):
    """The bundled model's own template names no thinking format: a format is harmless and taken,
    thinking off is what it does anyway, and asking it to think is refused."""
    r = client.chat.completions.create(
        model=MODEL_ID, messages=QUESTION, max_tokens=4, temperature=0,
        extra_body={"reasoning_format": "deepseek", "reasoning_budget_tokens": 2,
                    "chat_template_kwargs": {"enable_thinking": False}})
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})
    assert r.usage.completion_tokens_details.reasoning_tokens == 0
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=QUESTION, max_tokens=4,
                                       reasoning_effort="high")
    assert e.value.body["param"] == "reasoning_effort"


def test_the_server_flags_set_the_defaults_a_request_overrides(r1_model, tmp_path):
    srv = start_serve(r1_model, str(tmp_path), "--parallel", "1", "--reasoning-format", "none",
                      "--reasoning-budget", "2")
    try:
        body = {"model": R1_ID, "messages": QUESTION, "max_tokens": 40, "temperature": 0}
        raw = httpx.post(srv.base + "/v1/chat/completions", json=body, timeout=120).json()
        m = raw["choices"][0]["message"]
        assert "reasoning_content" not in m and m["content"].startswith("<think>\n")
        assert BUDGET_MESSAGE.strip() + "\n</think>" in m["content"]
        split = httpx.post(srv.base + "/v1/chat/completions", timeout=120,
                           json={**body, "reasoning_format": "deepseek"}).json()
        assert split["choices"][0]["message"]["reasoning_content"].endswith(BUDGET_MESSAGE.strip())
        metrics = httpx.get(srv.base + "/metrics", timeout=30).text
        counted = [ln for ln in metrics.splitlines() if ln.startswith("llamadesk_reasoning_tokens_total")]
        assert counted and float(counted[0].split()[-1]) == split["usage"]["completion_tokens_details"][
            "reasoning_tokens"], counted
    finally:
        srv.stop()


def test_an_unreadable_kwarg_is_left_out_and_a_read_one_reaches_the_template(ours):
    """A name the template never mentions could change nothing; the R1 template reads none but its
    switch, so an unknown key is harmless and the reply is the same split reply."""
    r = httpx.post(ours.base + "/v1/chat/completions", timeout=120, json={
        "model": R1_ID, "messages": QUESTION, "max_tokens": 48, "temperature": 0, "grammar": THINKING,
        "chat_template_kwargs": {"enable_thinking": True, "no_such_switch": {"a": [1]}}})
    assert r.status_code == 200, r.text
    m = json.loads(r.text)["choices"][0]["message"]
    assert words(m["reasoning_content"]) and sentence(m["content"])


def test_the_responses_api_gives_a_reasoning_item_then_the_message(ours):
    with openai_client(ours) as client:
        r = client.responses.create(model=R1_ID, input="What is the capital of France?", temperature=0,
                                    max_output_tokens=90, reasoning={"effort": "low"})
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "message"], kinds
    thought = r.output[0]
    assert [c.type for c in thought.content] == ["reasoning_text"] and thought.summary == []
    assert thought.content[0].text.endswith(BUDGET_MESSAGE.strip())  # the server's budget ended it
    assert "</think>" not in r.output_text
    n = r.usage.output_tokens_details.reasoning_tokens
    assert SERVER_BUDGET < n <= r.usage.output_tokens


def test_a_streamed_response_opens_the_reasoning_item_then_the_message(ours):
    with openai_client(ours) as client:
        events = list(client.responses.create(model=R1_ID, input="What is the capital of France?",
                                              temperature=0, max_output_tokens=90, stream=True,
                                              reasoning={"effort": "low"}))
    seq = [e.sequence_number for e in events]
    assert seq == sorted(seq) and len(set(seq)) == len(seq)
    names = [e.type for e in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] in (
        "response.completed", "response.incomplete")
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    done = [e.item.type for e in events if e.type == "response.output_item.done"]
    assert added == done == ["reasoning", "message"], (added, done)
    deltas = [e for e in events if e.type == "response.reasoning_text.delta"]
    assert deltas and all(e.output_index == 0 and e.content_index == 0 for e in deltas)
    first_message = names.index("response.output_text.done")
    assert names.index("response.reasoning_text.done") < first_message
    assert max(i for i, n in enumerate(names) if n == "response.reasoning_text.delta") < first_message
    final = events[-1].response
    assert "".join(e.delta for e in deltas) == final.output[0].content[0].text
    assert final.output[0].id == deltas[0].item_id
    assert final.usage.output_tokens_details.reasoning_tokens > SERVER_BUDGET


def test_a_response_held_to_the_shape_has_the_items_llama_server_gives(both):
    """llama-server's /v1/responses passes its chat fields on (grammar, chat_template_kwargs); so
    does this server's, so both are held to the same shape and their items compared."""
    for name, (client, model) in both.items():
        r = client.responses.create(model=model, input="What is the capital of France?", temperature=0,
                                    max_output_tokens=48,
                                    extra_body={"grammar": THINKING, "chat_template_kwargs": ON})
        assert [item.type for item in r.output] == ["reasoning", "message"], (name, r.output)
        thought, message = r.output
        assert [c.type for c in thought.content] == ["reasoning_text"], name
        assert words(thought.content[0].text), (name, thought)
        assert [c.type for c in message.content] == ["output_text"], name
        assert sentence(message.content[0].text.strip()), (name, message)


def test_a_batch_line_gets_the_split_body_an_online_request_gets(ours):
    line = json.dumps({"custom_id": "think-1", "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": R1_ID, "messages": QUESTION, "max_tokens": 48, "temperature": 0,
                                "grammar": THINKING, "chat_template_kwargs": ON}})
    batch, out, errors = run_batch(ours.base, (line + "\n").encode())
    assert batch["status"] == "completed" and not errors and len(out) == 1, (batch, errors)
    body = out[0]["response"]["body"]
    m = body["choices"][0]["message"]
    assert words(m["reasoning_content"]) and sentence(m["content"]), m
    usage = body["usage"]
    assert 0 < usage["completion_tokens_details"]["reasoning_tokens"] < usage["completion_tokens"]


def test_logprobs_of_a_split_reply_cover_its_answer(ours):
    """A whole reply's logprobs are every token's, the reasoning's too; a stream's come with the
    answer's deltas, and none of the answer's own is cut."""
    with openai_client(ours) as client:
        r = client.chat.completions.create(model=R1_ID, messages=QUESTION, max_tokens=48, temperature=0,
                                           logprobs=True, extra_body={"grammar": THINKING,
                                                                      "chat_template_kwargs": ON})
        whole = "".join(t.token for t in r.choices[0].logprobs.content)
        m = r.choices[0].message
        assert whole.startswith(m.model_extra["reasoning_content"]) and "</think>" in whole
        assert whole.rstrip().endswith(m.content)
        chunks = list(client.chat.completions.create(
            model=R1_ID, messages=QUESTION, max_tokens=48, temperature=0, logprobs=True, stream=True,
            extra_body={"grammar": THINKING, "chat_template_kwargs": ON}))
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    tokens = "".join(t.token for c in chunks if c.choices and c.choices[0].logprobs
                     for t in c.choices[0].logprobs.content or ())
    assert sentence(answer.strip()) and tokens.endswith(answer), (answer, tokens)
