"""/v1/embeddings as a Batch API endpoint, through the official openai package: each line is
answered with the vectors the online endpoint gives for the same input, in its body's shape, and
a line the online endpoint would refuse gets an error record in the same words."""

from __future__ import annotations

import base64
import io
import json

import numpy as np

from tests.serve.conftest import MODEL_ID
from tests.serve.test_batch_api import _wait

URL = "/v1/embeddings"


def _line(cid: str, url: str = URL, **body) -> str:
    return json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": {"model": MODEL_ID, **body}})


LINES = [
    _line("one", input="A cat sat on the mat."),
    _line("many", input=["A cat sat on the mat.", "Stock markets fell sharply."]),
    _line("b64", input="A kitten sat on a rug.", encoding_format="base64"),
    _line("ids", input=[[2, 818, 5279]]),
    _line("short", input="x", dimensions=7),
    _line("nobody"),
]


def test_an_embeddings_batch_answers_as_the_online_endpoint_does(client):
    f = client.files.create(file=("emb.jsonl", io.BytesIO(("\n".join(LINES) + "\n").encode())),
                            purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint=URL, completion_window="24h")
    done, _ = _wait(client, b.id)
    assert done.status == "completed" and done.endpoint == URL
    assert (done.request_counts.completed, done.request_counts.failed) == (4, 2)
    out = {o["custom_id"]: o["response"]
           for o in map(json.loads, client.files.content(done.output_file_id).text.splitlines())}
    errs = {e["custom_id"]: e["error"]["message"]
            for e in map(json.loads, client.files.content(done.error_file_id).text.splitlines())}
    assert set(out) == {"one", "many", "b64", "ids"} and all(r["status_code"] == 200 for r in out.values())

    online = client.embeddings.create(model=MODEL_ID, input=["A cat sat on the mat.",
                                                             "Stock markets fell sharply."])
    want = [np.array(d.embedding) for d in online.data]
    many = out["many"]["body"]
    assert [d["index"] for d in many["data"]] == [0, 1] and many["model"] == MODEL_ID
    assert many["usage"]["prompt_tokens"] == online.usage.prompt_tokens
    for got, w in zip(many["data"], want):
        assert np.allclose(np.array(got["embedding"]), w, atol=1e-4)
    assert np.allclose(np.array(out["one"]["body"]["data"][0]["embedding"]), want[0], atol=1e-4)
    packed = np.frombuffer(base64.b64decode(out["b64"]["body"]["data"][0]["embedding"]), dtype="<f4")
    assert packed.shape == want[0].shape and abs(float(np.linalg.norm(packed)) - 1) < 1e-4
    assert out["ids"]["body"]["usage"]["prompt_tokens"] == 3

    assert "dimensions" in errs["short"] and "7" not in errs["short"].split(":")[0]
    assert "input" in errs["nobody"]

