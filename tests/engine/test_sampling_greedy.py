"""Greedy without penalties takes the argmax of the logits row: the same token llama.cpp's
greedy sampler picks, without its vocabulary-sized candidate array."""

from __future__ import annotations

import llama_cpp
import pytest

from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings, Sampler


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=512))
    yield m
    m.close()


def test_argmax_picks_what_the_greedy_sampler_picks_token_after_token(model):
    llm = model.llm
    ours = Sampler(GenerationSettings(temperature=0, repeat_penalty=1.0), llm.n_vocab())
    theirs = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    llama_cpp.llama_sampler_chain_add(theirs, llama_cpp.llama_sampler_init_greedy())
    assert ours.argmax
    llm.reset()
    llm.eval(llm.tokenize(b"The capital of France is"))
    picked = []
    try:
        for _ in range(12):
            a = ours.sample(llm.ctx)
            b = llama_cpp.llama_sampler_sample(theirs, llm.ctx, -1)
            assert a == b
            picked.append(a)
            llm.eval([a])
    finally:
        llama_cpp.llama_sampler_free(theirs)
        ours.close()
    assert len(set(picked)) > 1  # it moved through different tokens, not one repeated


@pytest.mark.parametrize("settings", [
    GenerationSettings(temperature=0, repeat_penalty=1.1),
    GenerationSettings(temperature=0.7),
    GenerationSettings(temperature=0, repeat_penalty=1.0, dry_multiplier=0.8)])
def test_anything_beyond_plain_greedy_keeps_llama_cpps_chain(model, settings):
    s = Sampler(settings, model.llm.n_vocab(), llama_cpp.llama_model_get_vocab(model.llm.model))
    try:
        assert not s.argmax
    finally:
        s.close()
