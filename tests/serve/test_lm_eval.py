"""lm-eval, a real evaluator, scoring a small multiple-choice task from local files against
`llamadesk serve` through its `local-completions` model (echo, logprobs, token-id prompts, the
remote tokenizer endpoints); every log-likelihood it reads must be the model's own, computed here
with llama-cpp-python directly (every position's logits, softmaxed in float64)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.serve.conftest import MODEL_ID

DOCS = [
    {"q": "The capital of France is", "choices": ["Paris", "Berlin", "a banana"], "gold": 0},
    {"q": "Two plus two equals", "choices": ["four", "seven"], "gold": 0},
    {"q": "The sky on a clear day is", "choices": ["green", "blue"], "gold": 1},
]
TASK = """task: llamadesk_tiny
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: gold
metric_list:
  - metric: acc
"""


@pytest.fixture
def task_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "llamadesk_tiny.yaml").write_text(TASK.format(data=data))
    return tmp_path / "tasks"


def direct_loglikelihood(llm, context: str, continuation: str) -> float:
    """What lm-eval asks for, from the model itself: the continuation's tokens after the context's
    (tokenized as its remote tokenizer does, no BOS, split as its _encode_pair splits)."""
    whole = llm.tokenize((context + continuation).encode(), add_bos=False, special=False)
    ctx = llm.tokenize(context.encode(), add_bos=False, special=False)
    llm.reset()
    llm.eval(whole)
    logits = np.asarray(llm.scores[:len(whole)], dtype=np.float64)
    total = 0.0
    for pos in range(len(ctx), len(whole)):
        row = logits[pos - 1]
        m = row.max()
        total += row[whole[pos]] - (m + math.log(np.exp(row - m).sum()))
    return total


def test_lm_eval_loglikelihoods_are_the_models_own(serve, task_dir, model_path):
    import lm_eval
    from llama_cpp import Llama
    from lm_eval.tasks import TaskManager

    from app.engine.backend import avoid_amx_repack

    out = lm_eval.simple_evaluate(
        model="local-completions",
        model_args={"base_url": serve.base + "/v1/completions", "model": MODEL_ID,
                    "tokenizer_backend": "remote", "tokenized_requests": True, "max_retries": 1},
        tasks=["llamadesk_tiny"], task_manager=TaskManager(include_path=str(task_dir)), log_samples=True)
    samples = out["samples"]["llamadesk_tiny"]
    assert len(samples) == len(DOCS)
    assert 0 <= out["results"]["llamadesk_tiny"]["acc,none"] <= 1

    avoid_amx_repack()
    llm = Llama(str(model_path), n_ctx=256, logits_all=True, n_threads=2, verbose=False)
    try:
        for s in samples:
            assert len(s["arguments"]) == len(DOCS[s["doc_id"]]["choices"])
            # The (context, continuation) pairs lm-eval asked about, its target delimiter included.
            for (ll, _greedy), (context, continuation) in zip((r[0] for r in s["resps"]), s["arguments"],
                                                              strict=True):
                want = direct_loglikelihood(llm, context, continuation)
                # Not bit for bit: the server scores in batches of another shape, which a CPU rounds
                # differently; a wrong position or token would be off by whole nats.
                assert math.isclose(ll, want, rel_tol=0.02, abs_tol=0.05), (context, continuation, ll, want)
    finally:
        llm.close()
