"""Batch files: OpenAI request lines in, error records for bad lines, output records, resume."""

from __future__ import annotations

import json

import pytest

from app.batch_jsonl.job import BatchJob
from app.batch_jsonl.requests import BatchInputError, read_input
from app.batch_jsonl.results import BatchOutputError, ResultWriter, read_journal
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine

DEFAULTS = GenerationSettings(max_tokens=8, temperature=0)


def req(cid, content, **body):
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "any", "messages": [{"role": "user", "content": content}], **body}})


def test_request_lines_parse_with_per_request_settings_and_bad_lines_become_errors(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join([
        req("a", "Hi", max_tokens=5, temperature=0.3, top_p=0.5, seed=4, stop="!"),
        json.dumps({"custom_id": "b", "method": "POST", "url": "/v1/embeddings", "body": {}}),
        "{not json",
        json.dumps({"method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}),
        req("a", "duplicate"),
        "",
        req("c", [{"type": "text", "text": "parts"}], max_completion_tokens=3),
    ]) + "\n")
    items = read_input(f, DEFAULTS)
    by = {it.custom_id: it for it in items}
    at = {it.line: it for it in items}
    a = by["a"].request.settings
    assert (a.max_tokens, a.temperature, a.top_p, a.seed, a.stop) == (5, 0.3, 0.5, 4, ("!",))
    assert a.top_k == DEFAULTS.top_k  # unset fields keep the defaults
    assert "unknown url" in by["b"].error
    assert "malformed JSON" in at[3].error and "missing custom_id" in at[4].error
    assert "duplicate custom_id 'a' (first on line 1)" in at[5].error and at[5].request is None
    assert all(at[n].custom_id.startswith("#") for n in (3, 4, 5))  # automatic ids
    assert by["c"].request.messages[0].content == "parts" and by["c"].request.settings.max_tokens == 3
    assert [it.line for it in items] == [1, 2, 3, 4, 5, 7]
    assert len({it.custom_id for it in items}) == len(items)


def test_plain_text_is_one_prompt_per_line(tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("What is rain?\n\n  Name a colour.  \nWhat is rain?\n")
    items = read_input(f, DEFAULTS)
    assert [(it.line, it.request.messages[0].content) for it in items] == [
        (1, "What is rain?"), (3, "Name a colour."), (4, "What is rain?")]
    ids = [it.custom_id for it in items]
    assert ids[2] == ids[0] + ".2" and len(set(ids)) == 3 and all(i.startswith("#") for i in ids)
    assert [it.request.custom_id for it in items] == ids


def test_automatic_ids_cannot_meet_user_ids(tmp_path):
    """The hostile report's case: a user id "line-2" beside a malformed line 2."""
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join([req("line-1", "a"), "{oops", req("line-2", "b"), req("#x", "c"),
                             req("line-2", "dup"), req("#" + "0" * 16, "d")]) + "\n")
    items = read_input(f, DEFAULTS)
    ids = [it.custom_id for it in items]
    assert ids[0] == "line-1" and ids[2] == "line-2" and items[2].request is not None
    assert "kept for automatic ids" in items[3].error and "kept for automatic ids" in items[5].error
    assert "duplicate custom_id 'line-2' (first on line 3)" in items[4].error
    assert len(set(ids)) == 6 and all(ids[i].startswith("#") for i in (1, 3, 4, 5))


def test_lines_end_at_newline_only_and_a_bom_is_not_text(tmp_path):
    f = tmp_path / "in.jsonl"
    sep = json.dumps({"custom_id": "sep", "method": "POST", "url": "/v1/chat/completions",
                      "body": {"messages": [{"role": "user", "content": "a\u2028b\x85c"}]}},
                     ensure_ascii=False)
    f.write_bytes(b"\xef\xbb\xbf" + (req("bom", "x") + "\r\n" + sep + "\n").encode())
    items = read_input(f, DEFAULTS)
    assert [(it.custom_id, it.error) for it in items] == [("bom", None), ("sep", None)]
    assert items[1].request.messages[0].content == "a\u2028b\x85c"


BAD_FIELDS = [  # (body fields, the name the error must give)
    ('"max_tokens": Infinity', "max_tokens"), ('"max_tokens": 1e400', "max_tokens"),
    ('"max_tokens": 1e30', "max_tokens"), ('"max_tokens": 5.5', "max_tokens"),
    ('"max_tokens": "5"', "max_tokens"), ('"max_completion_tokens": 0', "max_completion_tokens"),
    ('"seed": 1e400', "seed"), ('"seed": 18446744073709551616', "seed"), ('"seed": -2', "seed"),
    ('"top_k": true', "top_k"), ('"top_k": 1000000000000', "top_k"), ('"top_k": {}', "top_k"),
    ('"temperature": NaN', "temperature"), ('"temperature": Infinity', "temperature"),
    ('"temperature": ' + "9" * 400, "temperature"), ('"top_p": NaN', "top_p"),
    ('"min_p": -Infinity', "min_p"), ('"repeat_penalty": Infinity', "repeat_penalty"),
    ('"temperature": "hot"', "temperature"), ('"stop": "\\ud83d"', "stop"), ('"stop": [1]', "stop"),
    ('"max_tokens": ' + "9" * 5000, "malformed JSON"),
]


def test_each_bad_field_is_its_lines_error_naming_the_field(tmp_path):
    f = tmp_path / "in.jsonl"
    head = '{"custom_id": "%s", "method": "POST", "url": "/v1/chat/completions", "body": {%s, '
    lines = [req("first", "hi")]
    lines += [head % (f"bad{i}", field) + '"messages": [{"role": "user", "content": "hi"}]}}'
              for i, (field, _) in enumerate(BAD_FIELDS)]
    lines += ['{"custom_id": "sur", "method": "POST", "url": "/v1/chat/completions", "body": '
              '{"messages": [{"role": "user", "content": "a\\udc00"}]}}',
              '{"custom_id": "\\ud800", "body": {}}', "[" * 50000 + "]" * 50000, req("last", "bye")]
    f.write_text("\n".join(lines) + "\n")
    items = read_input(f, DEFAULTS)
    assert len(items) == len(lines) and items[0].request and items[-1].request
    for it, (_, name) in zip(items[1:], BAD_FIELDS, strict=False):
        assert it.request is None and name in it.error and "\n" not in it.error, (name, it.error)
        assert len(it.error) < 200
    assert "content is not valid Unicode" in items[-4].error
    assert "custom_id is not valid Unicode" in items[-3].error and items[-3].custom_id.startswith("#")
    assert "nested too deeply" in items[-2].error
    out = tmp_path / "out.jsonl"
    w = ResultWriter(out, "m")
    for it in items:
        if it.error:
            w.write_error(it)
    w.close()
    assert len(out.read_text(encoding="utf-8").splitlines()) == len(items) - 2


def test_journal_cuts_a_half_written_last_line(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"custom_id": "a", "error": null}\n\n{"custom_id": "b", "response": {}}\n'
                   '{"custom_id": "c", "resp')
    assert read_journal(out).done == {"a", "b"}
    assert out.read_text().endswith('"response": {}}\n')


@pytest.mark.parametrize("content", [
    req("a", "hi") + "\n",  # a request file given as the output
    "What is rain?\nName a colour.\n",  # a prompt file
    '{"custom_id": "a", "error": null}\nmy notes, no newline',  # someone's file: not cut
])
def test_an_output_file_that_is_not_batch_output_is_refused_untouched(tmp_path, content):
    inp, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    inp.write_text("Say hi.\n")
    out.write_text(content)
    with pytest.raises(BatchOutputError) as e:
        BatchJob(inp, out, DEFAULTS)
    assert str(e.value).startswith(f"{out}: ") and "\n" not in str(e.value)
    assert out.read_text() == content


def test_the_input_as_output_is_refused(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(req("a", "hi") + "\n")
    with pytest.raises(BatchInputError):
        BatchJob(f, tmp_path / "." / "in.jsonl", DEFAULTS)
    assert f.read_text() == req("a", "hi") + "\n"


def _answer_all(items, out):
    """Journal a record for every item, as a finished run would, without decoding."""
    from app.slots.types import SlotResult, SlotStats

    w = ResultWriter(out, "m")
    for it in items:
        if it.error:
            w.write_error(it)
        else:
            w.write(SlotResult(it.custom_id, "text", SlotStats(), it.line))
    w.close()


def test_plain_text_edited_between_runs_runs_exactly_the_new_and_changed_lines(tmp_path):
    f, out = tmp_path / "prompts.txt", tmp_path / "out.jsonl"
    f.write_text("one\ntwo\nthree\nthree\n")
    _answer_all(BatchJob(f, out, DEFAULTS).todo, out)
    f.write_text("zero\none\nTWO\nthree\nthree\nthree\n")  # inserted, changed, one more copy
    job = BatchJob(f, out, DEFAULTS)
    assert [it.request.messages[0].content for it in job.todo] == ["zero", "TWO", "three"]
    assert job.skipped == 3
    _answer_all(job.todo, out)
    assert BatchJob(f, out, DEFAULTS).todo == []


def test_a_refused_line_fixed_by_the_user_runs_on_the_next_pass(tmp_path):
    f, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    f.write_text(req("x", "hi", temperature=-1) + "\n{broken\n" + req("y", "ok") + "\n")
    _answer_all(BatchJob(f, out, DEFAULTS).todo, out)
    again = BatchJob(f, out, DEFAULTS)
    assert again.todo == []  # unchanged: its error record stands, not written twice
    f.write_text(req("x", "hi", temperature=0.5) + "\n{broken\n" + req("y", "ok") + "\n")
    fixed = BatchJob(f, out, DEFAULTS)
    assert [(it.custom_id, it.error) for it in fixed.todo] == [("x", None)]
    _answer_all(fixed.todo, out)
    assert BatchJob(f, out, DEFAULTS).todo == []


def test_job_writes_openai_records_errors_included_and_resumes(model_path, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join([
        req("ok1", "Name a fruit.", max_tokens=4),
        req("long", "word " * 400, max_tokens=4),  # longer than a 256-token slot
        "garbage",
        req("ok2", "Name a city.", max_tokens=6, temperature=0),
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    model = load_model(model_path, LoadOptions(n_ctx=256))
    try:
        eng = BatchEngine(model, n_slots=2, slot_ctx=256)
        try:
            s = BatchJob(f, out, DEFAULTS).run(eng, "gemma")
            recs = {r["custom_id"]: r for r in map(json.loads, out.read_text().splitlines())}
            assert (s.ok, s.errors, s.skipped) == (2, 2, 0)
            ok = recs["ok2"]
            body = ok["response"]["body"]
            assert ok["error"] is None and ok["response"]["status_code"] == 200
            assert body["object"] == "chat.completion" and body["model"] == "gemma"
            u = body["usage"]
            assert u["completion_tokens"] == ok["llamadesk"]["completion_tokens"] <= 6
            assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
            assert body["choices"][0]["message"]["content"] == s.results[[r.custom_id for r in
                                                                          s.results].index("ok2")].text
            assert recs["long"]["response"] is None and "slot holds 256" in recs["long"]["error"]["message"]
            bad = next(r for r in recs.values() if r["llamadesk"]["line"] == 3)
            assert bad["custom_id"].startswith("#")
            assert bad["error"]["message"].startswith("line 3: malformed JSON")
            assert bad["error"]["code"] == "invalid_request"  # never reached the engine
            assert recs["long"]["error"]["code"] == "context_overflow"
            ttft = ok["llamadesk"]["ttft_from_queue_s"]  # None exactly when no text came
            assert (ttft is None) == (body["choices"][0]["message"]["content"] == "")
            assert ttft is None or ttft > 0
            again = BatchJob(f, out, DEFAULTS)
            assert again.todo == [] and again.skipped == 4
        finally:
            eng.free()
    finally:
        model.close()
    assert len(out.read_text().splitlines()) == 4


def test_a_batch_file_line_goes_through_the_online_requests_checks(tmp_path):
    """`llamadesk batch` and the Batch window read lines as the server reads a request: honoured or
    refused naming the parameter, never answered as if it were not there."""
    f = tmp_path / "in.jsonl"
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    f.write_text("\n".join([
        req("schema", "Hi", response_format={"type": "json_schema",
                                             "json_schema": {"name": "s", "schema": schema}}),
        req("tools", "Hi", tools=[tool], tool_choice="required"),
        req("logprobs", "Hi", logprobs=True),
        req("penalty", "Hi", frequency_penalty=0.5),
        req("n", "Hi", n=2),
        req("stream", "Hi", stream=True),
        req("image", [{"type": "image_url", "image_url": {"url": "x"}}]),
        req("dev", "Hi", messages=[{"role": "developer", "content": "Be brief."},
                                   {"role": "user", "content": "Hi"}]),
    ]) + "\n")
    by = {it.custom_id: it for it in read_input(f, DEFAULTS)}
    assert by["schema"].request.settings.constraint is not None and by["schema"].error is None
    tools_req = by["tools"].request
    assert tools_req.reply_as is not None and tools_req.messages[0].role == "system"
    assert "logprobs" in by["logprobs"].error and "n" in by["n"].error
    assert by["penalty"].error is None and by["penalty"].request.settings.frequency_penalty == 0.5
    assert "stream" in by["stream"].error and "text only" in by["image"].error
    assert [m.role for m in by["dev"].request.messages] == ["system", "user"]


def test_a_batch_api_file_for_embeddings_takes_embeddings_lines_only(tmp_path):
    from app.batch_jsonl.api_file import read_api_file

    f = tmp_path / "emb.jsonl"
    line = {"custom_id": "e", "method": "POST", "url": "/v1/embeddings",
            "body": {"model": "m", "input": "hi"}}
    f.write_text("\n".join([json.dumps(line), req("c", "Hi").replace('"any"', '"m"')]) + "\n")
    emb, chat = read_api_file(f, DEFAULTS, "m", "/v1/embeddings")
    assert emb.error is None and emb.embed == {"model": "m", "input": "hi"} and emb.request is None
    assert "is not this batch's endpoint /v1/embeddings" in chat.error and chat.embed is None
    emb, chat = read_api_file(f, DEFAULTS, "m")
    assert "is not this batch's endpoint /v1/chat/completions" in emb.error and chat.error is None
