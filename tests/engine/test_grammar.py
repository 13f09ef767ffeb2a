"""Constrained decoding on the real model: what the reply must match, it matches, checked by the
`jsonschema` package and by the regex and grammar themselves; what cannot be enforced is refused
naming the construct, before any decoding."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from app.engine.grammar import Constraint, GrammarError, compile_grammar
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine
from app.slots.types import SlotRequest

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "role"],
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "role": {"enum": ["engineer", "teacher", "doctor"]}}}


def _settings(c: Constraint, **kw) -> GenerationSettings:
    return GenerationSettings(**{"max_tokens": 60, "temperature": 0, "constraint": c, **kw})


def test_a_greedy_reply_to_a_schema_validates_and_carries_its_grammar_time(engine):
    r = engine.reply([], "Describe an engineer called Ada.", _settings(Constraint.json_schema(PERSON)))
    jsonschema.validate(json.loads(r.text), PERSON)
    assert r.stats.stop_reason == "stop" and r.stats.grammar_ms_per_token > 0
    free = engine.reply([], "Describe an engineer called Ada.",
                        GenerationSettings(max_tokens=8, temperature=0))
    assert free.stats.grammar_ms_per_token is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sampled_replies_keep_to_the_schema_whatever_the_draw(engine, seed):
    s = _settings(Constraint.json_schema(PERSON), temperature=1.0, seed=seed, repeat_penalty=1.1)
    r = engine.reply([], "A person, as JSON.", s)
    jsonschema.validate(json.loads(r.text), PERSON)


def test_any_json_object(engine):
    r = engine.reply([], "Give me a small JSON object about a cat.", _settings(Constraint.any_json(),
                                                                                max_tokens=80))
    assert r.stats.stop_reason == "stop" and isinstance(json.loads(r.text), dict)


def test_a_regex_and_a_gbnf_grammar_are_kept_to(engine):
    r = engine.reply([], "Call me on", _settings(Constraint("regex", r"\d{3}-\d{4}")))
    assert re.fullmatch(r"\d{3}-\d{4}", r.text), r.text
    g = engine.reply([], "Is the sky blue?", _settings(Constraint("gbnf", 'root ::= "yes" | "no"')))
    assert g.text in ("yes", "no") and g.stats.stop_reason == "stop"


@pytest.mark.parametrize("c, named", [
    (Constraint.json_schema({"type": "array", "uniqueItems": True}), "uniqueItems"),
    (Constraint.json_schema({"type": "object", "not": {"required": ["a"]}}), '"not"'),
    (Constraint("gbnf", "root ::= missing"), "missing"),
    (Constraint("regex", "(unclosed"), "unclosed"),
])
def test_what_cannot_be_enforced_is_refused_naming_the_construct(engine, c, named):
    with pytest.raises(GrammarError) as e:
        compile_grammar(c)
    assert named in str(e.value) and "\n" not in str(e.value)
    before = list(engine.decoder.tokens)
    with pytest.raises(GrammarError):
        engine.reply([], "Hello", _settings(c))
    assert engine.decoder.tokens == before, "refused before anything was evaluated"


def test_the_batch_engine_keeps_each_slot_to_its_own_constraint(model_path):
    from app.engine.loader import LoadOptions, load_model

    model = load_model(model_path, LoadOptions(n_ctx=512))
    eng = BatchEngine(model, n_slots=3, slot_ctx=512)
    try:
        msg = [MessageBody("user", "Describe a teacher.")]
        eng.submit_many([
            SlotRequest("json", msg, _settings(Constraint.json_schema(PERSON))),
            SlotRequest("free", msg, GenerationSettings(max_tokens=12, temperature=0)),
            SlotRequest("bad", msg, _settings(Constraint.json_schema({"type": "array",
                                                                      "uniqueItems": True}))),
        ])
        res = {r.custom_id: r for r in eng.run()}
    finally:
        eng.free()
        model.close()
    jsonschema.validate(json.loads(res["json"].text), PERSON)
    assert res["json"].stats.grammar_ms_per_token > 0 and res["free"].stats.grammar_ms_per_token is None
    assert res["free"].text and res["bad"].stats.error_kind == "invalid_request"
    assert "uniqueItems" in res["bad"].stats.error


def test_a_json_number_ends_at_the_digit_cap_but_holds_every_64_bit_integer(engine):
    """A small model that starts "1000" can write zeros until max_tokens cuts the JSON: past
    MAX_DIGIT_RUN digits a digit is refused wherever the grammar allows anything else."""
    import numpy as np

    from app.engine.grammar import MAX_DIGIT_RUN, GrammarMatcher

    llm = engine.model.llm
    (one,), (zero,) = (llm.tokenize(d, add_bos=False, special=False) for d in (b"1", b"0"))
    g = GrammarMatcher(Constraint.json_schema({"type": "integer"}), engine.decoder.vocab, llm.n_vocab())
    assert len(str(2**64 - 1)) <= MAX_DIGIT_RUN, "every uint64 fits under the cap"
    g.accept(one)
    for _ in range(MAX_DIGIT_RUN - 1):
        assert g.allows(zero)
        g.accept(zero)
    assert not g.allows(zero) and not g.allows(one)
    row = np.zeros(llm.n_vocab(), dtype=np.float32)
    g.mask_row(row)
    assert row[zero] == -np.inf and np.isfinite(row).any(), "the number may end, not grow"


def test_a_constraint_breaking_down_mid_reply_ends_that_reply_with_the_error(engine):
    """In the window's and ask's decoder as in the server's: the reply so far is kept, the error
    says how far it got, and the next reply runs."""
    from tests.serve.test_hostile_constraints import LATE

    r = engine.reply([], "Write the value.", _settings(Constraint.json_schema(LATE)))
    assert r.stats.stop_reason == "error" and r.stats.error.startswith("the constraint failed after")
    assert r.text.startswith('{"name": "')
    nxt = engine.reply([], "Describe an engineer called Ada.", _settings(Constraint.json_schema(PERSON)))
    jsonschema.validate(json.loads(nxt.text), PERSON)
