"""Log-probabilities, penalties, logit bias and embeddings on the real model: what an evaluator or
a retrieval client reads off LlamaDesk, checked against what the model's own logits say."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from app.engine.decoder import Decoder
from app.engine.embedder import Embedder
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.engine.scorer import Scorer


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=512))
    yield m
    m.close()


@pytest.fixture
def dec(model):
    """A decoder on the model's own context, from an empty KV cache."""
    d = Decoder(model)
    d.reset()
    yield d
    d.close()


def test_a_greedy_reply_carries_each_tokens_logprob_and_its_alternatives(dec):
    prompt = dec.tokenize("The capital of France is")
    r = dec.generate(prompt, GenerationSettings(max_tokens=6, temperature=0, repeat_penalty=1.0, logprobs=3))
    assert len(r.logprobs) == len(r.tokens) > 0
    for lp, tok in zip(r.logprobs, r.tokens):
        assert lp.token == tok and lp.logprob <= 0 and len(lp.top) == 3
        assert lp.top[0][0] == tok  # greedy, no penalty: the chosen token is the likeliest
        assert lp.top[0][1] >= lp.top[1][1] >= lp.top[2][1]
        assert abs(lp.top[0][1] - lp.logprob) < 1e-4


def test_the_scorer_agrees_with_the_decoders_own_logprobs(model, dec):
    """Both read the model's logits for the same position; the numbers agree within float noise
    (different batch shapes round differently on a CPU, so not exactly)."""
    text = model.llm.tokenize(b"The capital of France is Paris")
    sc = Scorer(model, 512)
    try:
        scored = sc.score(text, top=5)
    finally:
        sc.close()
    top20 = GenerationSettings(max_tokens=1, temperature=0, repeat_penalty=1.0, logprobs=20)
    r = dec.generate(text[:-1], top20)
    assert scored[0] is None and len(scored) == len(text)
    last = scored[-1]
    assert last.token == text[-1] and last.logprob < 0
    alts = dict(r.logprobs[0].top)
    assert text[-1] in alts, "Paris is among the 20 likeliest next tokens"
    assert math.isclose(alts[text[-1]], last.logprob, abs_tol=0.05)


def test_penalties_and_logit_bias_change_what_is_chosen(dec):
    prompt = dec.tokenize("Count: one, two, three,")
    plain = dec.generate(prompt, GenerationSettings(max_tokens=4, temperature=0, repeat_penalty=1.0))
    first = plain.tokens[0]
    banned = dec.generate(prompt, GenerationSettings(max_tokens=4, temperature=0, repeat_penalty=1.0,
                                                     logit_bias=((first, -100.0),)))
    with pytest.raises(ValueError, match="vocabulary"):
        dec.generate(prompt, GenerationSettings(max_tokens=1, logit_bias=((10**9, 1.0),)))
    pen = dec.generate(prompt, GenerationSettings(max_tokens=12, temperature=0, repeat_penalty=1.0,
                                                  frequency_penalty=2.0, presence_penalty=2.0))
    assert banned.tokens[0] != first
    assert len(set(pen.tokens)) == len(pen.tokens), "with both penalties at 2 no token comes twice"


def test_embeddings_are_unit_vectors_and_put_like_texts_together(model):
    emb = Embedder(model, 512)
    try:
        texts = ("A cat sat on the mat.", "A kitten sat on a rug.", "Stock markets fell sharply.")
        cat, kitten, stocks = (emb.embed(emb.tokenize(t)) for t in texts)
        raw = emb.embed(emb.tokenize("A cat sat on the mat."), normalize=False)
    finally:
        emb.close()
    assert cat.shape == (emb.dim,) and abs(float(np.linalg.norm(cat)) - 1) < 1e-5
    assert float(cat @ kitten) > float(cat @ stocks)
    assert np.allclose(raw / np.linalg.norm(raw), cat, atol=1e-5)


def test_llamadesk_embed_prints_openais_list(model_path):
    r = subprocess.run([sys.executable, "-m", "app", "embed", "--model", str(model_path), "one", "two"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["index"] for d in doc["data"]] == [0, 1] and doc["usage"]["prompt_tokens"] > 0
    assert abs(float(np.linalg.norm(doc["data"][0]["embedding"])) - 1) < 1e-4
    bad = subprocess.run([sys.executable, "-m", "app", "embed", "--model", str(model_path), " "],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
