"""Batch files: OpenAI request lines in, error records for bad lines, output records, resume."""

from __future__ import annotations

import json

from app.batch.engine import BatchEngine
from app.batchfile.job import BatchJob
from app.batchfile.requests import read_input
from app.batchfile.results import done_ids
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings

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
    a = by["a"].request.settings
    assert (a.max_tokens, a.temperature, a.top_p, a.seed, a.stop) == (5, 0.3, 0.5, 4, ("!",))
    assert a.top_k == DEFAULTS.top_k  # unset fields keep the defaults
    assert "unknown url" in by["b"].error
    assert "malformed JSON" in by["line-3"].error and "missing custom_id" in by["line-4"].error
    assert "duplicate" in by["a#line-5"].error
    assert by["c"].request.messages[0].content == "parts" and by["c"].request.settings.max_tokens == 3
    assert [it.line for it in items] == [1, 2, 3, 4, 5, 7]


def test_plain_text_is_one_prompt_per_line(tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("What is rain?\n\n  Name a colour.  \n")
    items = read_input(f, DEFAULTS)
    assert [(it.custom_id, it.request.messages[0].content) for it in items] == [
        ("line-1", "What is rain?"), ("line-3", "Name a colour.")]


def test_done_ids_cuts_a_half_written_last_line(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"custom_id": "a"}\n{"custom_id": "b"}\n{"custom_id": "c", "resp')
    assert done_ids(out) == {"a", "b"}
    assert out.read_text().endswith('"b"}\n')


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
            assert recs["line-3"]["error"]["message"].startswith("line 3: malformed JSON")
            assert recs["line-3"]["error"]["code"] == "invalid_request"  # never reached the engine
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
