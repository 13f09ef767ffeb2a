"""Speculative decoding in the batch engine, on the real model: a slot decoding alone checks
guesses, and the reply is the model's own; steps shared with another slot never check.

Correctness is asserted as for the chat decoder (tests/engine/test_speculative.py): each batch
the engine evaluated is evaluated again in its own context, in the same shapes from the same
cache state, and the token the reply holds is the model's greedy choice in every row.
"""

from __future__ import annotations

import pytest

from app.engine import batch_fill
from app.engine.draft import draft_for
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine
from app.slots.speculation import NEVER_ALONE, BatchSpeculation
from app.slots.types import SlotRequest
from tests.engine.spec_replay import replay
from tests.engine.test_speculative import EDIT

pytestmark = pytest.mark.model


def greedy(n: int) -> GenerationSettings:
    return GenerationSettings(max_tokens=n, temperature=0, repeat_penalty=1.0, ignore_eos=True, logprobs=1)


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=256))
    yield m
    m.close()


class Recording(BatchSpeculation):
    """Keeps each reply's Speculation (its checks, to replay) by request."""

    def __init__(self, *a):
        super().__init__(*a)
        self.made: dict = {}

    def of(self, slot):
        self.made[slot.req.custom_id] = spec = super().of(slot)
        return spec


class InBatch:
    """The engine's own context and llama_batch as replay() drives a decoder: sequence 0."""

    def __init__(self, eng: BatchEngine):
        self.ctx, self._batch = eng.ctx, eng._llama_batch
        self.n_vocab, self.n_batch = eng.n_vocab, eng.n_batch

    def _fill(self, toks, pos0, want_logits, every_row=False):
        batch_fill.fill(self._batch, toks, pos0, every_row, want_logits)


def _edit(model) -> list[int]:
    return model.llm.tokenize(EDIT.encode())


def _engine(model, spec, n_slots=2) -> BatchEngine:
    return BatchEngine(model, n_slots=n_slots, slot_ctx=512, keep_prefixes=True, speculation=spec)


def test_a_slot_alone_checks_guesses_and_its_reply_is_the_models_choice_in_every_row(model):
    spec = Recording("ngram")
    eng = _engine(model, spec)
    prompt = _edit(model)
    try:
        eng.submit_online(SlotRequest("edit", prompt_tokens=prompt, settings=greedy(48)))
        (res,) = eng.run()
        st = res.stats
        made = spec.made["edit"]
        assert st.slot == 0 and st.completion_tokens == 48
        assert st.spec_mode == "ngram" and st.draft_tokens >= st.draft_accepted > 0
        assert st.spec_checks == len(made.checks) > 0 and st.spec_stepped_aside is None
        per_pos = st.draft_accepted_per_pos  # a guess is kept only after every one before it
        assert sum(per_pos) == st.draft_accepted and per_pos == sorted(per_pos, reverse=True)
        assert eng.bctx.holds(0) == len(prompt) + 47  # the rejected guesses' rows are gone
        reply = [lp.token for lp in res.logprobs]
        assert all(lp.token == lp.top[0][0] for lp in res.logprobs)  # each row's own argmax
        pairs = replay(InBatch(eng), prompt, reply, made.checks)
        assert len(pairs) == len(reply) and [r for r, _ in pairs] == [m for _, m in pairs]
    finally:
        eng.free()


def test_steps_shared_with_another_slot_never_check(model):
    eng = _engine(model, Recording("ngram"))
    busy: list[int] = []
    check = eng._check

    def counted(s, *a):
        busy.append(sum(x is not None for x in eng.slots))
        check(s, *a)

    eng._check = counted
    prompt = _edit(model)
    try:
        eng.submit_online(SlotRequest("long", prompt_tokens=prompt, settings=greedy(40)))
        eng.submit_online(SlotRequest("short", prompt_tokens=prompt, settings=greedy(8)))
        res = {r.custom_id: r.stats for r in eng.run()}
    finally:
        eng.free()
    assert busy and set(busy) == {1}  # every check ran with one busy slot
    short, long_ = res["short"], res["long"]
    assert (short.spec_mode, short.draft_tokens, short.spec_checks) == ("ngram", 0, 0)
    assert short.spec_stepped_aside == NEVER_ALONE
    assert long_.spec_checks == len(busy) and long_.draft_accepted > 0  # alone once the short one ended
    assert long_.completion_tokens == 40


def test_a_draft_model_guesses_for_a_slot_alone(model, model_path):
    """The bundled model drafting for itself: the same vocabulary, and guesses nearly always kept."""
    draft = draft_for(model, load_model(model_path, LoadOptions(n_ctx=512)))
    spec = BatchSpeculation("draft", draft)
    eng = _engine(model, spec)
    try:
        eng.submit_online(SlotRequest("q", prompt_tokens=model.llm.tokenize(b"Question: What do bees make?\n"
                                                                           b"Answer:"), settings=greedy(24)))
        (res,) = eng.run()
    finally:
        eng.free()
        spec.close()
    st = res.stats
    assert st.spec_mode == "draft" and st.draft_tokens >= st.draft_accepted > 0 and st.completion_tokens == 24
    assert all(lp.token == lp.top[0][0] for lp in res.logprobs)


def test_a_sampled_reply_alone_keeps_its_counts_straight(model):
    eng = _engine(model, BatchSpeculation("ngram"))
    settings = GenerationSettings(max_tokens=40, temperature=0.7, seed=3, ignore_eos=True)
    try:
        eng.submit_online(SlotRequest("s", prompt_tokens=_edit(model), settings=settings))
        (res,) = eng.run()
    finally:
        eng.free()
    st = res.stats
    assert st.completion_tokens == 40 and st.error is None
    assert st.draft_tokens >= st.draft_accepted and st.spec_checks <= st.draft_tokens


def test_without_speculation_no_reply_says_anything_of_it(model):
    eng = _engine(model, None)
    try:
        eng.submit_online(SlotRequest("p", prompt_tokens=_edit(model), settings=greedy(8)))
        (res,) = eng.run()
    finally:
        eng.free()
    assert res.stats.spec_mode is None and res.stats.draft_tokens == 0
