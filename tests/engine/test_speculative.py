"""Speculative decoding on the real model: the reply is the target's own, row for row.

Correctness is asserted where it can be on any CPU: each row of each batch the
decoder evaluated is evaluated again, in the same batch shapes from the same
cache state, and the token the reply holds there is the model's own greedy
choice. Agreement with plain one-token steps (different batch shapes, so not
bit-identical logits) is measured by bench --speculative, not asserted here.
"""

from __future__ import annotations

import pytest

from app.engine.decoder import Decoder
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.engine.speculative import WARMUP_CHECKS, NgramDrafter, Pacer, Speculation
from tests.engine.spec_replay import replay

pytestmark = pytest.mark.model

# An editing task: the reply repeats most of the prompt, which is what prompt lookup guesses from.
TEXT = ("def area(width, height):\n    return width * height\n\n"
        "def perimeter(width, height):\n    return 2 * (width + height)\n")
EDIT = f"Copy this code exactly:\n\n{TEXT}\nCopy:\n\n{TEXT[:12]}"
GREEDY = GenerationSettings(max_tokens=48, temperature=0, repeat_penalty=1.0, ignore_eos=True,
                            speculative="ngram")


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=1024))
    yield m
    m.close()


@pytest.fixture
def dec(model):
    d = Decoder(model)
    d.reset()  # the model's context is shared by the tests: each decoder starts from an empty cache
    yield d
    d.close()


def test_a_greedy_speculative_reply_is_the_models_own_choice_in_every_row(dec):
    prompt = dec.tokenize(EDIT)
    done = dec.generate(prompt, GREEDY)
    spec = dec.last_speculation
    assert spec is not None and spec.checks, "the editing prompt gave prompt lookup nothing to check"
    st = done.stats
    assert st.spec_mode == "ngram" and st.draft_tokens >= st.draft_accepted > 0
    assert st.spec_checks == len(spec.checks) and st.decode_tokens == len(done.tokens) == 48
    assert dec.kv_used() == len(dec.tokens) == len(prompt) + 47  # rejected guesses' rows removed
    pairs = replay(dec, prompt, list(done.tokens), spec.checks)
    assert len(pairs) == len(done.tokens)
    assert [r for r, _ in pairs] == [m for _, m in pairs]


def test_after_a_speculative_reply_the_next_turn_reuses_the_cache_as_after_a_plain_one(dec):
    prompt = dec.tokenize(EDIT)
    first = dec.generate(prompt, GREEDY)
    follow = prompt + list(first.tokens) + dec.tokenize("\nAnd again:\n", add_bos=False)
    again = dec.generate(follow, GREEDY)
    assert again.stats.cached_tokens == len(prompt) + len(first.tokens) - 1  # its last was never fed
    assert again.stats.decode_tokens == 48 and dec.kv_used() == len(dec.tokens)


def test_a_sampled_speculative_reply_keeps_its_counts_straight(dec):
    prompt = dec.tokenize(EDIT)
    s = GenerationSettings(max_tokens=40, temperature=0.7, seed=7, ignore_eos=True, speculative="ngram")
    done = dec.generate(prompt, s)
    st = done.stats
    assert st.decode_tokens == len(done.tokens) == 40 and done.text
    assert 0 <= st.draft_accepted <= st.draft_tokens
    assert dec.kv_used() == len(dec.tokens) == len(prompt) + 39
    if st.spec_checks:
        assert st.plain_tok_s and st.decode_tok_s and st.speculation()


def test_without_the_setting_nothing_speculates(dec):
    done = dec.generate(dec.tokenize(EDIT), GenerationSettings(max_tokens=8, temperature=0))
    assert done.stats.spec_mode is None and dec.last_speculation is None


def test_prompt_lookup_continues_the_latest_longest_match():
    d = NgramDrafter([1, 2, 3, 4, 5, 9, 2, 3, 4, 6, 7])
    d.extend([2, 3, 4])
    assert d.propose(3) == [6, 7, 2]  # after "2 3 4" the latest time, not the first
    d.extend([8])
    assert d.propose(2) == []  # "4 8" never came before, nor "8"
    assert NgramDrafter([]).propose(4) == []


def test_the_pacer_steps_aside_when_checks_are_slower_than_plain_steps():
    p = Pacer()
    p.plain_step(0.010)
    for _ in range(WARMUP_CHECKS):
        assert p.active
        p.check(drafted=4, kept=0, dt=0.030)  # one token for three steps' time
    assert not p.active and "0.33x" in p.stepped_aside
    assert p.speedup() < 1 and p.best_k(8) == 0


def test_the_pacer_checks_only_what_it_expects_to_pay_and_learns_both_ways():
    p = Pacer()
    p.plain_step(0.010)
    assert p.best_k(8) == 0  # nothing known of the guesses: a check's fixed cost is not worth it
    for _ in range(10):
        p.agreed(8, False)  # unchecked guesses that the reply then took
    assert p.best_k(8) == 8 and p.best_k(3) == 3
    for k, dt in ((8, 0.015), (4, 0.013)) * 3:  # checks cheaper than the prior said
        p.check(drafted=k, kept=k, dt=dt)
    assert p.cost(6) == pytest.approx(0.014, rel=0.01) and p.active and p.speedup() > 3
    for _ in range(100):
        p.agreed(0, True)  # the text stopped repeating
    assert p.best_k(8) == 0


def test_unchecked_guesses_are_scored_against_the_tokens_the_reply_takes():
    spec = Speculation(NgramDrafter([5, 6, 7, 8, 5, 6]), Pacer(plain_s=0.01))
    assert spec.guesses(8) == [] and spec.unchecked == [7, 8, 5, 6]  # looked up, not checked
    for t in (7, 8, 9):
        spec.took(t)
    assert spec.unchecked == [] and (spec.pacer.right, spec.pacer.wrong) == (2, 1)


@pytest.mark.subprocess
def test_ask_speculative_ngram_says_what_it_was_worth_in_its_footer(model_path):
    import subprocess
    import sys
    from pathlib import Path

    r = subprocess.run([sys.executable, "-m", "app", "ask", "--no-save", "--model", str(model_path),
                        "--speculative", "ngram", "--temperature", "0", "--repeat-penalty", "1",
                        "--max-tokens", "32", EDIT], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    footer = r.stderr.strip().splitlines()[-1]
    assert "prompt lookup: " in footer, footer  # its guesses kept, or that none were worth a check
