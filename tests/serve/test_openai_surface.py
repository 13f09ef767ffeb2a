"""The rest of the OpenAI surface through the official openai package (and LangChain's embeddings),
against `llamadesk serve` on the bundled model: embeddings, the Responses API, model lookup,
logprobs, n > 1, the tokenizer endpoints."""

from __future__ import annotations

import json
import math

import httpx
import jsonschema
import numpy as np
import openai
import pytest

from tests.serve.conftest import MODEL_ID

HI = [{"role": "user", "content": "Name a colour."}]


def budget(longest) -> int:
    r"""Tokens enough for any reply a JSON-schema constraint allows, given `longest`, that reply at its
    longest: every string at its maxLength of "\x01", which the compact JSON grammar writes as
    \u0001 (6 bytes, the most it spends on a character). No token is shorter than a byte; one more
    is for the end of the reply. A constraint guarantees its JSON only when the reply can finish."""
    return len(json.dumps(longest).encode()) + 1


# -- embeddings ---------------------------------------------------------------
def test_embeddings_for_a_string_a_list_and_token_ids(client):
    one = client.embeddings.create(model=MODEL_ID, input="A cat sat on the mat.")
    texts = ["A cat sat on the mat.", "A kitten sat on a rug.", "Stock markets fell sharply."]
    many = client.embeddings.create(model=MODEL_ID, input=texts, encoding_format="float")
    ids = client.embeddings.create(model=MODEL_ID, input=[[2, 818, 5279]])
    v = [np.array(d.embedding) for d in many.data]
    assert [d.index for d in many.data] == [0, 1, 2] and len(v[0]) == len(one.data[0].embedding) > 0
    assert all(abs(float(np.linalg.norm(x)) - 1) < 1e-4 for x in v)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert np.allclose(v[0], one.data[0].embedding, atol=1e-4)  # base64 (the client's default) = float
    assert many.usage.prompt_tokens > one.usage.prompt_tokens > 0 and len(ids.data) == 1


def test_embeddings_refuse_what_they_cannot_honour(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=MODEL_ID, input="x", dimensions=64)
    assert e.value.body["param"] == "dimensions"
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=MODEL_ID, input=[[10**9]])
    assert e.value.body["param"] == "input"


def test_langchain_embeddings(serve):
    from langchain_openai import OpenAIEmbeddings

    # Its default counts tokens with tiktoken, which downloads its tables: off, as the docs advise.
    emb = OpenAIEmbeddings(base_url=serve.base + "/v1", api_key="unused", model=MODEL_ID,
                           check_embedding_ctx_length=False)
    docs = emb.embed_documents(["rain", "snow"])
    query = emb.embed_query("weather")
    assert len(docs) == 2 and len(query) == len(docs[0]) > 0


# -- the Responses API ----------------------------------------------------------
def test_responses_whole_and_continued_from_a_stored_one(client):
    first = client.responses.create(model=MODEL_ID, input="Name a fruit.", instructions="Answer briefly.",
                                    max_output_tokens=16, temperature=0)
    assert first.object == "response" and first.output_text and first.id.startswith("resp_")
    assert first.usage.input_tokens > 0 and 0 < first.usage.output_tokens <= 16
    second = client.responses.create(model=MODEL_ID, input="And a vegetable?", previous_response_id=first.id,
                                     max_output_tokens=16, temperature=0)
    assert second.output_text and second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens, "the earlier turn was in the prompt"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=MODEL_ID, input="x", previous_response_id="resp_nope")


def test_responses_stream_in_openais_event_order(client):
    kinds, text, last = [], [], None
    # Cut at max_output_tokens a response ends with response.incomplete, as OpenAI's does (the
    # SDK's get_final_response() waits for response.completed only), so the last event is read.
    with client.responses.stream(model=MODEL_ID, input=[{"role": "user", "content": "Say hello."}],
                                 max_output_tokens=12, temperature=0) as stream:
        for ev in stream:
            kinds.append(ev.type)
            if ev.type == "response.output_text.delta":
                text.append(ev.delta)
            last = ev
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete") and "response.output_text.done" in kinds
    assert "".join(text) == last.response.output_text and last.response.output_text
    assert last.response.usage.output_tokens > 0


def test_responses_structured_and_with_a_tool(client):
    schema = {"type": "object", "additionalProperties": False, "required": ["city"],
              "properties": {"city": {"type": "string", "maxLength": 24}}}
    city = {"city": "\x01" * 24}
    r = client.responses.create(model=MODEL_ID, input="The capital of Italy, as JSON.", temperature=0,
                                max_output_tokens=budget(city),
                                text={"format": {"type": "json_schema", "name": "city", "schema": schema}})
    jsonschema.validate(json.loads(r.output_text), schema)
    tool = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
            "parameters": schema}
    # "required" with parallel_tool_calls false: the grammar allows exactly one call, and the budget
    # lets it finish (with parallel calls allowed the model may write several, cut by a small budget).
    r = client.responses.create(model=MODEL_ID, input="Weather in Rome?", tools=[tool],
                                tool_choice="required", parallel_tool_calls=False, temperature=0,
                                max_output_tokens=budget({"tool_calls": [{"name": "get_weather",
                                                                          "arguments": city}]}))
    assert r.status == "completed"
    (call,) = [o for o in r.output if o.type == "function_call"]
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), schema)
    result = [{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny."}]
    done = client.responses.create(model=MODEL_ID, previous_response_id=r.id, max_output_tokens=16,
                                   temperature=0, input=result)
    assert done.output_text
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_ID, previous_response_id=r.id, max_output_tokens=4,
                                input=[{**result[0], "call_id": "call_nobody_made"}])
    assert e.value.body["param"] == "input" and "'call_nobody_made' matches no function_call" in str(e.value)


def test_a_tool_result_answering_no_call_is_refused_as_a_missing_id_is(client):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    asked = [{"role": "user", "content": "Weather?"},
             {"role": "assistant", "content": "Let me look.", "tool_calls": [call]}]
    ok = client.chat.completions.create(model=MODEL_ID, max_tokens=4, messages=[
        *asked, {"role": "tool", "tool_call_id": "call_1", "content": "Sunny."}])
    assert ok.choices[0].message.content is not None  # an assistant turn with text and calls counts its ids
    for cid in ("call_2", ""):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL_ID, max_tokens=4, messages=[
                *asked, {"role": "tool", "tool_call_id": cid, "content": "Sunny."}])
        assert e.value.body["param"] == "messages" and "messages[2].tool_call_id" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL_ID, max_output_tokens=4, input=[
            {"role": "user", "content": "Weather?"},
            {"type": "function_call_output", "call_id": "call_9", "output": "Sunny."}])
    assert e.value.body["param"] == "input" and "input[1].call_id 'call_9'" in e.value.body["message"]


# -- routes, logprobs, n, tokenizer ---------------------------------------------
def test_a_model_is_looked_up_by_id(client):
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4o")
    assert e.value.body["code"] == "model_not_found"


def test_chat_logprobs_whole_and_streamed(client):
    r = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=5, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    # A stop string's tokens are counted in usage but cut from the text, and from its logprobs.
    assert 0 < len(content) <= r.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3 and t.bytes
        assert t.top_logprobs[0].logprob >= t.top_logprobs[-1].logprob
    assert "".join(t.token for t in content).strip() == r.choices[0].message.content.strip()
    streamed = [e for ch in client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=5,
                                                           temperature=0, logprobs=True, top_logprobs=3,
                                                           stream=True)
                if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert streamed and all(t.logprob <= 0 and t.bytes for t in streamed)
    for t in (*content, *streamed):  # greedy: each token is its row's most likely (ties aside)
        assert math.isclose(t.logprob, t.top_logprobs[0].logprob, rel_tol=1e-6, abs_tol=1e-6)
    # The second request reuses a cached prompt, so its logits come from another batch shape and
    # cache state (never compared as floats): the same greedy tokens, or a parting at a token the
    # first request also had among its top three.
    same = next((i for i, (a, b) in enumerate(zip(streamed, content)) if a.token != b.token),
                min(len(streamed), len(content)))
    if same < min(len(streamed), len(content)):
        alts = {t.token for t in content[same].top_logprobs}
        assert streamed[same].token in alts, "a parting at a token the first request did not consider"


def test_completion_logprobs_with_echo_give_the_prompts_own(client, serve):
    prompt = "The capital of France is Paris"
    r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=1, temperature=0, logprobs=1,
                                  echo=True)
    lp = r.choices[0].logprobs
    assert r.choices[0].text.startswith(prompt)
    # Text gets the BOS the server adds, so even its first token has a logprob (given the BOS).
    assert all(x is not None and x <= 0 for x in lp.token_logprobs)
    assert "".join(lp.tokens[:-1]) == prompt
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[-1] == len(prompt)
    # Token ids are taken as given: nothing predicts the first, as OpenAI's echo says with None.
    ids = httpx.post(serve.base + "/tokenize", json={"prompt": prompt, "add_special_tokens": False},
                     timeout=30).json()["tokens"]
    by_ids = client.completions.create(model=MODEL_ID, prompt=[ids], max_tokens=0, echo=True, logprobs=2)
    lp2 = by_ids.choices[0].logprobs
    assert by_ids.choices[0].text == prompt and lp2.token_logprobs[0] is None
    assert len(lp2.tokens) == len(ids) and all(len(t) <= 2 for t in lp2.top_logprobs[1:])


def test_n_choices_each_with_its_own_index_and_finish(client):
    one = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=8, temperature=1.0, seed=3)
    r = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=8, temperature=1.0, seed=3,
                                       n=3)
    assert [c.index for c in r.choices] == [0, 1, 2] and all(c.message.content for c in r.choices)
    assert r.usage.prompt_tokens == one.usage.prompt_tokens, "the prompt is counted once"
    assert 3 <= r.usage.completion_tokens <= 3 * 8
    stream = client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=6, temperature=1.0, n=2,
                                            stream=True)
    finished = {c.index for ch in stream for c in ch.choices if c.finish_reason}
    assert finished == {0, 1}


def test_tokenizer_endpoints_round_trip(serve):
    toks = httpx.post(serve.base + "/tokenize", json={"prompt": "Hello there", "add_special_tokens": False},
                      timeout=30).json()["tokens"]
    assert toks and httpx.post(serve.base + "/detokenize", json={"tokens": toks},
                               timeout=30).json()["prompt"] == "Hello there"
    info = httpx.get(serve.base + "/tokenizer_info", timeout=30).json()
    assert info["eos_token"] and info["model_max_length"] > 0


def test_logit_bias_steers_the_reply_and_checks_its_token_ids(client, serve):
    ask = dict(model=MODEL_ID, messages=HI, max_tokens=3, temperature=0, logprobs=True)
    first = client.chat.completions.create(**ask).choices[0].logprobs.content[0]
    greedy = first.top_logprobs[0] if first.top_logprobs else first
    ids = httpx.post(serve.base + "/tokenize", json={"prompt": greedy.token, "add_special_tokens": False},
                     timeout=30).json()["tokens"]
    banned = client.chat.completions.create(**ask, logit_bias={str(ids[0]): -100})
    assert banned.choices[0].logprobs.content[0].token != greedy.token
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**ask, logit_bias={"999999999": 5})
    assert e.value.body["param"] == "logit_bias" and "vocabulary" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**ask, presence_penalty=3)
    assert e.value.body["param"] == "presence_penalty"


def test_frequency_penalty_makes_a_loop_repeat_less(client):
    ask = dict(model=MODEL_ID, prompt="cat cat cat cat cat cat cat cat", max_tokens=24, temperature=0,
               logprobs=0)

    def repeats(**kw) -> int:
        toks = client.completions.create(**ask, **kw).choices[0].logprobs.tokens
        return max(toks.count(t) for t in set(toks))

    assert repeats(frequency_penalty=2.0) < repeats()


def test_completions_answer_each_prompt_of_a_list(client):
    r = client.completions.create(model=MODEL_ID, prompt=["One, two,", "Red, green,"], max_tokens=4,
                                  temperature=0, n=2, seed=1)
    assert [c.index for c in r.choices] == [0, 1, 2, 3] and all(c.text for c in r.choices)
    alone = [client.completions.create(model=MODEL_ID, prompt=p, max_tokens=4, temperature=0)
             for p in ("One, two,", "Red, green,")]
    assert r.choices[2].text and r.choices[0].text != r.choices[2].text, "each prompt its own answer"
    assert r.usage.prompt_tokens == sum(a.usage.prompt_tokens for a in alone), "each prompt counted once"


def test_an_image_part_is_refused_not_dropped(client):
    img = [{"type": "text", "text": "What is this?"},
           {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": img}])
    assert "image_url" in e.value.body["message"] and "text only" in e.value.body["message"]


def test_each_request_leaves_one_line_in_the_servers_log(client, serve):
    before = serve.log.read_text(errors="replace").count("\n")
    client.chat.completions.create(model=MODEL_ID, messages=HI, max_tokens=2)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=HI, max_tokens=2)
    client.embeddings.create(model=MODEL_ID, input=["one", "two"])
    client.models.list()
    client.files.list()
    httpx.get(serve.base + "/health", timeout=10)
    lines = serve.log.read_text(errors="replace").splitlines()[before:]
    ok = [x for x in lines if "POST /v1/chat/completions 200" in x]
    assert len(ok) == 1 and "prompt=" in ok[0] and "generated=" in ok[0] and "ttft_ms=" in ok[0]
    assert any("404" in x and "nope" in x for x in lines)
    (emb,) = [x for x in lines if "POST /v1/embeddings 200" in x]
    assert f"model={MODEL_ID}" in emb and "inputs=2" in emb and "prompt=" in emb and "total_ms=" in emb
    for route in ("GET /v1/models 200", "GET /v1/files 200"):
        assert len([x for x in lines if route in x and "total_ms=" in x]) == 1, route
    assert not any("/health" in x for x in lines), "a health probe is not an INFO line"


def test_files_are_listed_retrieved_and_deleted(client, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                             "body": {"model": MODEL_ID, "messages": HI, "max_tokens": 2}}) + "\n")
    with f.open("rb") as fh:
        up = client.files.create(file=fh, purpose="batch")
    assert up.id in [x.id for x in client.files.list()]
    assert client.files.retrieve(up.id).bytes == f.stat().st_size
    assert client.files.content(up.id).read() == f.read_bytes()
    gone = client.files.delete(up.id)
    assert gone.deleted and gone.id == up.id
    assert up.id not in [x.id for x in client.files.list()]
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(up.id)
    with pytest.raises(openai.NotFoundError):
        client.files.delete(up.id)
