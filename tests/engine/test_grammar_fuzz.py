"""Whatever schema a client sends, the matcher either refuses it up front with a GrammarError or
keeps to it, and a reply that goes on can only end in a GrammarError, never anything else: the
server's engine thread survives every schema (tests/serve/test_engine_survival.py shows the
rest). Random schemas built from the keywords people use, recursion and hostile sizes included,
against the real model's vocabulary."""

from __future__ import annotations

import json

import llama_cpp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.grammar import Constraint, GrammarError, GrammarMatcher
from app.engine.loader import LoadOptions, load_model

WALK = 24  # tokens each accepted schema is walked
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

sizes = st.sampled_from([0, 1, 3, 50, 10_000, 1_000_000])
leaf = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda n: {"type": "string", "pattern": f"^a{{{n}}}$"}, sizes),
    st.builds(lambda n, m: {"type": "string", "minLength": n, "maxLength": max(n, m)}, sizes, sizes),
    st.builds(lambda lo, hi: {"type": "integer", "minimum": -lo, "maximum": hi}, sizes, sizes),
    st.just({"type": "number"}), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.lists(st.text(max_size=8), min_size=1, max_size=4).map(lambda xs: {"enum": xs}),
    st.sampled_from([{"$ref": "#"}, {"$ref": "#/$defs/x"}, {"$ref": "#/nowhere"}, True, False, {}]),
)


def _object(props: dict, required: list) -> dict:
    return {"type": "object", "properties": props, "required": [k for k in required if k in props]}


schemas = st.recursive(leaf, lambda inner: st.one_of(
    st.builds(_object, st.dictionaries(st.sampled_from("abcd"), inner, max_size=3),
              st.lists(st.sampled_from("abcd"), max_size=3)),
    st.builds(lambda it, n: {"type": "array", "items": it, "minItems": n}, inner, st.sampled_from([0, 1, 2])),
    st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
    st.lists(inner, min_size=1, max_size=2).map(lambda xs: {"allOf": xs}),
), max_leaves=8).map(lambda s: {"$defs": {"x": s}, **s} if isinstance(s, dict) else s)


@pytest.fixture(scope="module")
def vocab(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=64))
    yield llama_cpp.llama_model_get_vocab(m.llm.model), m.llm.n_vocab()
    m.close()


@FUZZ
@given(schema=schemas, seed=st.integers(0, 2**16))
def test_every_schema_is_refused_up_front_or_walked_with_only_grammar_errors(vocab, schema, seed):
    v, n_vocab = vocab
    c = Constraint.json_schema(schema)
    try:
        g = GrammarMatcher(c, v, n_vocab)
    except GrammarError as e:
        assert "\n" not in str(e) and str(e).startswith("the JSON schema cannot be enforced"), str(e)
        return
    rng = np.random.default_rng(seed)
    row = np.zeros(n_vocab, dtype=np.float32)
    try:
        for _ in range(WALK):
            row[:] = rng.standard_normal(n_vocab)  # a random model's logits
            tok = int(row.argmax())
            if not g.allows(tok):
                g.mask_row(row)
                tok = int(row.argmax())
            g.accept(tok)
            if g.finished:
                break
    except GrammarError as e:
        assert str(e).startswith("the constraint failed after") and "\n" not in str(e), str(e)
    assert json.dumps(schema)  # the case, for hypothesis's report


def test_a_constraint_is_probed_once_per_vocabulary(vocab, monkeypatch):
    """The server tries a constraint before queueing it; its slot's matcher does not walk the same
    tokens again, and a constraint that failed is tried again (it is not remembered as good)."""
    v, n_vocab = vocab
    calls: list[int] = []
    real = GrammarMatcher._probe
    monkeypatch.setattr(GrammarMatcher, "_probe", lambda self: calls.append(1) or real(self))
    good = Constraint.json_schema({"type": "object", "properties": {"probed": {"type": "integer"}}})
    for _ in range(3):
        GrammarMatcher(good, v, n_vocab)
    assert len(calls) == 1
    bad = Constraint.json_schema({"type": "string", "pattern": "^q{1000000}$"})
    for _ in range(2):
        with pytest.raises(GrammarError):
            GrammarMatcher(bad, v, n_vocab)
    assert len(calls) == 3
