"""A model's first constrained reply indexes its vocabulary (LLGuidance's tokenizer, the digit
table): the reply says so while it waits (a Preparing event), its record times the setup as part
of TTFT, and an engine told to prepare ahead spares the reply the wait. On a model of its own, so
no earlier test has indexed it already."""

from __future__ import annotations

import pytest

from app.chat.live_gauges import LiveGauges
from app.chat.local_engine import LocalChatEngine
from app.engine import vocabulary
from app.engine.decoder import INDEXING
from app.engine.events import PrefillStarted, Preparing
from app.engine.grammar import Constraint
from app.engine.loader import LoadOptions
from app.engine.sampling import GenerationSettings

JSON = GenerationSettings(max_tokens=6, temperature=0, constraint=Constraint.any_json())


@pytest.fixture
def fresh(model_path):
    eng = LocalChatEngine.open(model_path, LoadOptions(n_ctx=512))
    yield eng
    eng.close()


def _reply(eng, settings=JSON):
    events: list = []
    r = eng.reply([], "Give me a JSON object about Paris.", settings, on_event=events.append)
    return r, events


def test_the_first_constrained_reply_says_it_indexes_and_times_it_within_ttft(fresh):
    assert not vocabulary.ready(fresh.decoder.vocab)
    first, events = _reply(fresh)
    kinds = [type(e) for e in events]
    assert Preparing in kinds and kinds.index(Preparing) < kinds.index(PrefillStarted)
    assert [e.what for e in events if isinstance(e, Preparing)] == [INDEXING]
    st = first.stats
    assert st.grammar_setup_s is not None and 0 < st.grammar_setup_s <= st.ttft_s
    assert vocabulary.ready(fresh.decoder.vocab)

    second, events = _reply(fresh)
    assert not any(isinstance(e, Preparing) for e in events), "indexed once per model, not per reply"
    assert second.stats.grammar_setup_s is not None
    free, events = _reply(fresh, GenerationSettings(max_tokens=4, temperature=0))
    assert free.stats.grammar_setup_s is None and not any(isinstance(e, Preparing) for e in events)


def test_prepared_ahead_the_first_constrained_reply_does_not_wait_for_the_index(fresh):
    fresh.prepare_constraints()
    assert vocabulary.ready(fresh.decoder.vocab)
    r, events = _reply(fresh)
    assert not any(isinstance(e, Preparing) for e in events)
    assert r.stats.grammar_setup_s is not None and r.stats.stop_reason in ("stop", "length")


def test_the_live_gauges_say_what_the_wait_is_spent_on_until_the_prompt_is_read():
    g = LiveGauges(n_ctx=512)
    g.start(10.0, 64, 512, constrained=True)
    g.feed(Preparing(INDEXING), 10.1)
    snap = g.snapshot(11.0)
    assert snap.phase == "waiting" and snap.preparing == INDEXING
    assert snap.turns[-1].setup_s == pytest.approx(snap.turns[-1].wait_s)
    g.feed(PrefillStarted(40, 0, 40, 512), 12.0)
    snap = g.snapshot(12.5)
    assert snap.preparing is None and snap.turns[-1].setup_s == pytest.approx(2.0)
