"""A prefix several slots share is evaluated once, in both KV layouts, and the disk prompt cache
serves the batch engine as it serves the chat: counted in the engine's prefill tokens, with the
real model. No text is compared between shapes (CPU kernels round differently per batch)."""

from __future__ import annotations

import threading

import pytest

from app.engine.control import common_prefix
from app.engine.loader import LoadOptions, load_model
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine
from app.slots.types import BatchProgress, SlotRequest

QUESTIONS = ["What is the capital of France?", "Name a large animal.", "Why is the sky blue?",
             "What is bread made of?", "Describe a river in one line.", "What do bees make?",
             "Name a planet.", "What is rain?"]


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=256))
    yield m
    m.close()


def chat(i: int, q: str, n: int = 6) -> SlotRequest:
    return SlotRequest(f"q{i}", [MessageBody("user", q)],
                       GenerationSettings(max_tokens=n, temperature=0, ignore_eos=True))


def run8(eng: BatchEngine, online: bool = True, n: int = 6):
    reqs = [chat(i, q, n) for i, q in enumerate(QUESTIONS)]
    prompts = [eng.prompt_for(r)[0] for r in reqs]
    for r in reqs:
        eng.submit_online(r) if online else eng.submit_many([r])
    return {r.custom_id: r for r in eng.run()}, prompts


@pytest.mark.parametrize("unified", [False, True], ids=["streams", "unified"])
def test_eight_chats_that_arrive_together_evaluate_their_preamble_once(model, unified):
    eng = BatchEngine(model, n_slots=8, slot_ctx=512, keep_prefixes=True, kv_unified=unified)
    try:
        res, prompts = run8(eng)
    finally:
        eng.free()
    assert common_prefix(prompts[0], prompts[1]) > 50  # the transcript's preamble
    assert all(r.ok and r.stats.completion_tokens == 6 for r in res.values())
    # The first evaluated its whole prompt; each other one only what no earlier prompt shares
    # with it (the preamble, and "What is" where two questions start alike).
    shared = [0] + [max(common_prefix(p, q) for q in prompts[:i]) for i, p in enumerate(prompts) if i]
    c = eng.prefixes.counts
    assert c.evaluated == sum(len(p) for p in prompts) - sum(shared)
    assert c.shared == sum(shared) and c.prompts == sum(len(p) for p in prompts)
    assert [res[f"q{i}"].stats.shared_tokens for i in range(8)] == shared
    assert all(r.stats.cached_tokens == r.stats.shared_tokens for r in res.values())


def test_without_sharing_every_slot_evaluates_its_whole_prompt(model):
    eng = BatchEngine(model, n_slots=8, slot_ctx=512, keep_prefixes=True, share_prefixes=False)
    try:
        res, prompts = run8(eng)
    finally:
        eng.free()
    assert eng.prefixes.counts.evaluated == sum(len(p) for p in prompts)
    assert all(r.stats.cached_tokens == 0 for r in res.values())


def test_batch_work_shares_the_preamble_too(model):
    """The Batch window and `llamadesk batch` (no kept prefixes) share among busy slots."""
    eng = BatchEngine(model, n_slots=4, slot_ctx=512)
    try:
        res, prompts = run8(eng, online=False)
    finally:
        eng.free()
    pre = common_prefix(prompts[0], prompts[1])
    assert all(r.ok and r.stats.completion_tokens == 6 for r in res.values())
    assert eng.prefixes.counts.evaluated <= sum(len(p) for p in prompts) - 7 * pre


@pytest.mark.parametrize("unified", [False, True], ids=["streams", "unified"])
def test_a_request_that_arrives_later_copies_the_preamble_from_a_busy_slot(model, unified):
    seen = threading.Event()
    def on_event(ev) -> None:
        if isinstance(ev, BatchProgress) and ev.decoding:
            seen.set()

    eng = BatchEngine(model, n_slots=2, slot_ctx=512, keep_prefixes=True, kv_unified=unified,
                      on_event=on_event)
    out: dict = {}
    try:
        eng.submit_online(chat(0, QUESTIONS[0], 40))
        t = threading.Thread(target=lambda: out.setdefault("res", eng.run()), daemon=True)
        t.start()
        assert seen.wait(60)
        eng.submit_online(chat(1, QUESTIONS[1], 6))
        t.join(120)
        assert not t.is_alive()
        later = eng.prompt_for(chat(1, QUESTIONS[1]))[0]
        first = eng.prompt_for(chat(0, QUESTIONS[0]))[0]
    finally:
        eng.free()
    res = {r.custom_id: r for r in out["res"]}
    pre = common_prefix(first, later)
    assert res["q1"].ok and res["q1"].stats.completion_tokens == 6 and res["q0"].stats.completion_tokens == 40
    assert res["q1"].stats.shared_tokens == pre and res["q1"].stats.slot != res["q0"].stats.slot


def test_a_slot_waiting_for_a_cancelled_leader_evaluates_the_prefix_itself(model):
    eng = BatchEngine(model, n_slots=4, slot_ctx=512, keep_prefixes=True)
    try:
        first, second = chat(0, QUESTIONS[0], 6), chat(1, QUESTIONS[1], 6)
        eng.submit_online(first)
        eng.submit_online(second)
        eng.cancel_request("q0")  # cancelled at the first step: before it evaluated anything
        res = {r.custom_id: r for r in eng.run()}
    finally:
        eng.free()
    assert res["q0"].stats.stop_reason == "cancelled"
    assert res["q1"].ok and res["q1"].stats.completion_tokens == 6 and res["q1"].stats.shared_tokens == 0


def test_the_reply_carries_its_inter_token_gaps(model):
    eng = BatchEngine(model, n_slots=2, slot_ctx=512)
    try:
        eng.submit_many([chat(0, QUESTIONS[0], 9)])
        (r,) = eng.run()
    finally:
        eng.free()
    assert len(r.itl_s) == 8 and all(g > 0 for g in r.itl_s)


def test_the_disk_prompt_cache_gives_a_new_engine_the_preamble(model, tmp_path):
    """The first engine saves the format's shared prefix as its slot evaluates it; a second one,
    as after a server restart, loads it instead of evaluating it."""
    from app import paths

    runs = []
    for q in QUESTIONS[:2]:
        eng = BatchEngine(model, n_slots=2, slot_ctx=512, keep_prefixes=True, prompt_cache=True)
        try:
            eng.submit_online(chat(0, q, 4))
            (r,) = eng.run()
            runs.append((r, eng.prefixes.counts, eng.prompt_for(chat(0, q))[0]))
        finally:
            eng.free()
    (r1, c1, p1), (r2, c2, p2) = runs
    pre = common_prefix(p1, p2)
    assert r1.ok and r1.stats.cached_disk_tokens == 0 and c1.evaluated == len(p1)
    assert any(paths.prompt_cache_dir().glob("*.kv"))
    assert r2.ok and r2.stats.completion_tokens == 4
    assert 0 < r2.stats.cached_disk_tokens <= pre and r2.stats.cached_tokens == r2.stats.cached_disk_tokens
    assert c2.disk == r2.stats.cached_disk_tokens and c2.evaluated == len(p2) - c2.disk
