"""Sliding-window checkpoints on the bundled Gemma 3: a branch that goes back past the window
reuses the prefix up to a checkpoint instead of evaluating the whole prompt again.

The engine here keeps a small window to go back in (n_ubatch 64: its SWA cache holds 512 + 64
cells) and prefills in chunks of 256, so a prompt of ~800 tokens is longer than the window and
a fork ~300 tokens back is past it. The branch's reply is compared with a cold run's where that
holds on any x86-64 CPU: the logits of its first token agree to a tolerance (the restored window
is the bytes the prefill wrote, but the cache's cells may sit in another order, and the sums'
rounding with them), and the greedy token is the same wherever the cold run's top two are not
within that tolerance of each other.
"""

from __future__ import annotations

import logging

import llama_cpp
import numpy as np
import pytest

from app.engine.control import common_prefix
from app.engine.decoder import Decoder
from app.engine.events import PrefillStarted
from app.engine.loader import LoadOptions, load_model
from app.engine.sampling import GenerationSettings
from app.engine.swa_checkpoints import Checkpoint, SwaCheckpoints

N_BATCH, N_UBATCH = 256, 64
ONE = GenerationSettings(max_tokens=1, temperature=0, ignore_eos=True)
TOLERANCE = 0.25  # logits of a model whose values span tens: rounding, not another state


@pytest.fixture(scope="module")
def dec(model_path):
    model = load_model(model_path, LoadOptions(n_ctx=2048, n_batch=N_BATCH, n_ubatch=N_UBATCH))
    d = Decoder(model)
    yield d
    d.close()
    model.close()


def _notes(n: int, seed: int) -> str:
    places = ("the harbour wall", "the old mill", "the salt marsh", "the ferry landing", "the orchard",
              "the lime kiln", "the weir", "the market hall", "the signal box", "the rope walk")
    times = ("the spring fair", "the great storm", "the long winter", "the railway strike")
    return " ".join(f"{places[(i * 7 + seed) % len(places)].capitalize()} was rebuilt after "
                    f"{times[(i + seed) % len(times)]}, and the stones still show the masons' marks."
                    for i in range(n))


def _prompts(d: Decoder) -> tuple[list[int], list[int]]:
    """main: notes, a first question and answer, more notes, a last question; branch: the same
    notes and first answer, then another question. Their fork lies past the window."""
    shared = f"Notes: {_notes(24, 1)}\nUser: Which buildings changed?\nAssistant: {_notes(4, 2)}\nUser:"
    main = d.tokenize(f"{shared} Tell me about the weir.\nAssistant: {_notes(14, 3)}\n"
                      "User: And the orchard?\nAssistant:")
    branch = d.tokenize(f"{shared} Who paid for the repairs, do the notes say?\nAssistant:")
    return main, branch


def _answer(d: Decoder, prompt: list[int]) -> tuple[int, int, np.ndarray, int]:
    """(cached as PrefillStarted said it, cached as ReplyStats says it, the first token's
    logits, the greedy token)."""
    started: list[PrefillStarted] = []
    done = d.generate(prompt, ONE, on_event=lambda e: started.append(e) if isinstance(e, PrefillStarted)
                      else None)
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(d.ctx, -1), shape=(d.n_vocab,)).copy()
    assert len(started) == 1 and done.stats.stop_reason in ("stop", "length")
    assert started[0].cached_tokens + started[0].new_tokens == len(prompt)
    return started[0].cached_tokens, done.stats.cached_tokens, logits, done.tokens[0]


def _window_is_gone(d: Decoder, held: int, fork: int) -> bool:
    """The rollback from what the cache holds to the fork is more than the SWA cells keep."""
    return held - fork > N_UBATCH + 1


def test_a_branch_past_the_window_reuses_the_prefix_up_to_a_checkpoint(dec):
    main, branch = _prompts(dec)
    fork = common_prefix(main, branch)
    assert dec.n_swa == 512 and len(main) > dec.n_swa + N_UBATCH and fork > N_BATCH
    dec.reset()
    _answer(dec, main)
    assert _window_is_gone(dec, len(dec.tokens), fork)
    assert dec.checkpoints is not None and len(dec.checkpoints) >= 2
    cached, stats_cached, logits, tok = _answer(dec, branch)
    expect = fork // N_BATCH * N_BATCH  # the last chunk end of main's prefill at or before the fork
    assert cached == stats_cached == expect > 0
    assert dec.checkpoints.costs.restored == 1 and dec.checkpoints.costs.failed == 0
    dec.reset()
    cold_cached, _, cold, cold_tok = _answer(dec, branch)
    assert cold_cached == 0
    assert float(np.abs(logits - cold).max()) < TOLERANCE
    top2 = np.sort(cold)[-2:]
    if top2[1] - top2[0] > 2 * TOLERANCE:
        assert tok == cold_tok


def test_each_checkpoint_holds_the_window_before_its_end_and_only_the_held_path_is_kept(dec):
    main, branch = _prompts(dec)
    dec.reset()
    _answer(dec, main)
    cps = dec.checkpoints
    assert cps is not None
    ends = [c.end for c in cps.items]
    assert ends == list(range(N_BATCH, len(main), N_BATCH))  # each chunk's end but the last
    for c in cps.items:
        assert list(c.tokens) == main[:c.end] and c.pos_min <= max(0, c.end - dec.n_swa)
        assert 0 < len(c.data) < 16 << 20  # the window alone, not the whole cache
    restart, _, _, _ = _answer(dec, branch)  # back past the window, and on along the branch
    assert restart == common_prefix(main, branch) // N_BATCH * N_BATCH
    # main's past the restart are gone; the branch's prefill took its own from there on
    assert [c.end for c in cps.items] == [e for e in ends if e <= restart] + list(
        range(restart + N_BATCH, len(branch), N_BATCH))
    assert all(list(c.tokens) == branch[:c.end] for c in cps.items)


def test_a_checkpoint_that_will_not_load_means_the_whole_prompt_honestly(dec, caplog):
    main, branch = _prompts(dec)
    dec.reset()
    _answer(dec, main)
    cps = dec.checkpoints
    assert cps is not None and len(cps)
    for c in cps.items:
        c.data[:] = bytes(len(c.data))  # not a state llama.cpp recognises
    with caplog.at_level(logging.WARNING, logger="llamadesk.engine"):
        cached, stats_cached, _, _ = _answer(dec, branch)
    assert cached == stats_cached == 0
    assert "would not load" in caplog.text
    assert dec.kv_used() == len(dec.tokens)  # and the cache still says what it holds
    again, _, _, _ = _answer(dec, branch)  # the engine goes on as before
    assert again == len(branch) - 1


def _cp(end: int, size: int = 10) -> Checkpoint:
    return Checkpoint(tuple(range(end)), max(0, end - 4), bytearray(size))


def test_the_list_is_bounded_and_keeps_its_checkpoints_spread():
    cps = SwaCheckpoints(None, n_swa=4, max_count=4, max_bytes=1000)
    cps.items = [_cp(e) for e in (100, 200, 210, 400)]
    cps.items.append(_cp(500))
    cps._bound()
    assert [c.end for c in cps.items] == [100, 200, 400, 500]  # 210 was closest after its predecessor
    cps.max_bytes = 25
    cps._bound()
    assert len(cps.items) == 2 and cps.items[-1].end == 500 and cps.bytes <= 25
    assert cps.costs.evicted == 3


def test_only_a_checkpoint_the_prompt_begins_with_and_the_cache_holds_is_chosen():
    cps = SwaCheckpoints(None, n_swa=4)
    a, b = _cp(8), _cp(16)
    other = Checkpoint((9,) * 12, 8, bytearray(1))
    cps.items = [a, b, other]
    prompt = list(range(30))
    assert cps.best(prompt, 20) is b
    assert cps.best(prompt, 15) is a  # b ends past what the cache holds of the prompt
    assert cps.best(prompt, 7) is None
    cps.keep_held([*range(12), 99])
    assert cps.items == [a]
