"""A batch line that fails while it decodes is that line's error record, never a line lost: a
constraint that compiles but cannot be kept to (a string of a million "a"s in a reply of a few
dozen tokens) fails mid-decode beside a normal line, on a server of its own, since the failure
is the engine's. Every line gets exactly one record and request_counts add up."""

from __future__ import annotations

import io
import json
import tempfile

from tests.serve.conftest import MODEL_ID, openai_client, start_serve
from tests.serve.test_batch_api import _wait

UNKEEPABLE = {"type": "string", "pattern": "^a{1000000}$"}


def _line(cid: str, **body) -> str:
    return json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": MODEL_ID, "max_tokens": 32, "temperature": 0,
                                "messages": [{"role": "user", "content": "Write some letters."}], **body}})


def test_a_grammar_failing_mid_decode_is_an_error_record_and_the_other_line_is_answered(model_path):
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-serve-grammar-"), "--parallel", "2")
    try:
        with openai_client(srv) as client:
            lines = [_line("grammar", response_format={"type": "json_schema", "json_schema": {
                         "name": "letters", "schema": UNKEEPABLE}}), _line("plain")]
            f = client.files.create(file=("g.jsonl", io.BytesIO(("\n".join(lines) + "\n").encode())),
                                    purpose="batch")
            b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                      completion_window="24h")
            done, _ = _wait(client, b.id, timeout=120)
            counts = done.request_counts
            assert done.status == "completed", done.errors
            assert (counts.total, counts.completed, counts.failed) == (2, 1, 1)
            out = [json.loads(s) for s in client.files.content(done.output_file_id).text.splitlines()]
            errs = [json.loads(s) for s in client.files.content(done.error_file_id).text.splitlines()]
            assert [o["custom_id"] for o in out] == ["plain"]
            assert out[0]["response"]["body"]["choices"][0]["message"]["content"]
            assert [e["custom_id"] for e in errs] == ["grammar"] and errs[0]["response"] is None
            assert errs[0]["error"]["code"] and errs[0]["error"]["message"]
            # The engine that every online client needs is still there.
            reply = client.chat.completions.create(model=MODEL_ID, max_tokens=4,
                                                   messages=[{"role": "user", "content": "Hi"}])
            assert reply.choices[0].message.content is not None
    finally:
        srv.stop()
