"""Continuous batching with the real model: slot refill, per-request settings,
one-slot greedy equality with the Decoder, prompt builders, typed errors,
online priority, pause and cancel."""

from __future__ import annotations

import threading
import time

import pytest

from app.engine.decoder import Decoder
from app.engine.errors import ContextOverflowError
from app.engine.events import Finished, TextDelta
from app.engine.loader import LoadOptions, load_model
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.slots.engine import BatchEngine
from app.slots.types import BatchProgress, RequestDone, RequestStarted, SlotRequest

TOPICS = ["the sea", "a red fox", "bread", "rain", "mountains", "a clock", "trains", "the moon",
          "coffee", "a library", "winter", "bees"]


@pytest.fixture(scope="module")
def model(model_path):
    m = load_model(model_path, LoadOptions(n_ctx=1024))
    yield m
    m.close()


def _engine(model, n, **kw) -> BatchEngine:
    return BatchEngine(model, n_slots=n, slot_ctx=512, **kw)


def fixed(n: int, **kw) -> GenerationSettings:
    return GenerationSettings(max_tokens=n, temperature=0, ignore_eos=True, **kw)


def ask(i: int, text: str, settings: GenerationSettings) -> SlotRequest:
    return SlotRequest(f"r{i}", [MessageBody("user", text)], settings)


def raw(model, i: int, text: str, settings: GenerationSettings) -> SlotRequest:
    """Pre-tokenized, so no transcript stop string ends it before max_tokens."""
    return SlotRequest(f"r{i}", prompt_tokens=model.llm.tokenize(text.encode()), settings=settings)


def test_short_request_frees_its_slot_for_the_queue_before_long_ones_end(model):
    eng = _engine(model, 2)
    try:
        eng.submit_many([raw(model, 0, "Tell me a story.", fixed(40)), raw(model, 1, "Hi.", fixed(3)),
                         raw(model, 2, "Name a fruit.", fixed(3)), raw(model, 3, "Name a city.", fixed(3))])
        res = {r.custom_id: r.stats for r in eng.run()}
    finally:
        eng.free()
    long_, short, q1, q2 = res["r0"], res["r1"], res["r2"], res["r3"]
    assert [s.completion_tokens for s in (long_, short, q1, q2)] == [40, 3, 3, 3]
    # The queued requests ran in the short one's slot while the long one was still decoding.
    assert q1.slot == short.slot != long_.slot and q2.slot == short.slot
    assert short.finished_at <= q1.slot_start < q1.finished_at <= q2.slot_start < long_.finished_at
    assert q1.queue_wait_s > 0 and long_.queue_wait_s < q1.queue_wait_s


def test_per_request_settings_are_honoured(model):
    reqs = [raw(model, 0, "Count: one, two, three,", fixed(5)),
            raw(model, 1, "Count: one, two, three,", fixed(11)),
            SlotRequest("stop", [MessageBody("user", "List the days of the week, comma separated.")],
                         GenerationSettings(max_tokens=40, temperature=0, stop=(",",))),
            ask(3, "Write a poem about rain.", GenerationSettings(max_tokens=12, temperature=1.0, seed=7)),
            ask(4, "Write a poem about rain.", GenerationSettings(max_tokens=12, temperature=1.0, seed=8))]
    texts = []
    for _ in range(2):
        eng = _engine(model, 3)
        try:
            eng.submit_many(reqs)
            res = {r.custom_id: r for r in eng.run()}
        finally:
            eng.free()
        texts.append({k: r.text for k, r in res.items()})
    assert res["r0"].stats.completion_tokens == 5 and res["r0"].stats.stop_reason == "length"
    assert res["r1"].stats.completion_tokens == 11
    st = res["stop"]
    assert st.stats.stop_reason == "stop" and "," not in st.text and st.stats.completion_tokens < 40
    assert texts[0]["r3"] == texts[1]["r3"] and texts[0]["r4"] == texts[1]["r4"]  # seeds reproduce
    assert res["r3"].text != res["r4"].text


def _alone(model, eng: BatchEngine, reqs, n):
    dec = Decoder(model)
    try:
        out = {}
        for r in reqs:
            toks, stop = eng.prompt_for(r)
            dec.reset()
            out[r.custom_id] = dec.generate(toks, GenerationSettings(max_tokens=n, temperature=0,
                                                                     stop=stop)).text
        return out
    finally:
        dec.close()


def _topics(n: int) -> list[SlotRequest]:
    return [SlotRequest(f"t{i}", [MessageBody("user", f"Write a short paragraph about {t}.")],
                         GenerationSettings(max_tokens=16, temperature=0)) for i, t in enumerate(TOPICS[:n])]


def test_one_slot_greedy_equals_decoded_alone(model):
    """One slot gives llama.cpp the Decoder's single-sequence batch shapes: the same text.

    Only this case is compared. With several slots a ubatch holds rows of other
    sequences, and llama.cpp's CPU kernels accumulate in an order that depends
    on the batch shape, so a greedy near-tie can flip on one CPU and not on
    another; see the next test.
    """
    reqs = _topics(4)
    one = _engine(model, 1)
    try:
        one.submit_many(reqs)
        single = {r.custom_id: r.text for r in one.run()}
        alone = _alone(model, one, reqs, 16)
    finally:
        one.free()
    assert len(single) == 4 and single == alone


def test_several_slots_finish_every_request_at_full_length(model):
    """Structural facts only (no text comparison): they cannot depend on rounding."""
    eng = _engine(model, 4)
    try:
        reqs = [SlotRequest(r.custom_id, prompt_tokens=eng.prompt_for(r)[0], settings=fixed(16))
                for r in _topics(8)]
        eng.submit_many(reqs)
        res = {r.custom_id: r for r in eng.run()}
    finally:
        eng.free()
    assert sorted(res) == sorted(r.custom_id for r in reqs)
    for r in res.values():
        assert r.ok and r.stats.stop_reason == "length" and r.stats.error_kind is None
        assert r.stats.completion_tokens == 16 and r.stats.prompt_tokens > 0 and r.text
    assert {r.stats.slot for r in res.values()} == {0, 1, 2, 3}


def test_build_prompt_runs_with_the_slot_context_and_its_tokens_are_decoded(model):
    history = [MessageBody("user", "An old question about " + "many things " * 30),
               MessageBody("assistant", "An old answer."), MessageBody("user", "Name a fruit.")]
    calls = []

    def build(slot_ctx, to_tokens):
        toks = to_tokens(history[-1:])  # a budget that keeps only the last message
        calls.append((slot_ctx, toks, threading.current_thread()))
        return toks

    eng = _engine(model, 2)
    try:
        req = SlotRequest("b", settings=fixed(4, stop=("zz",)), build_prompt=build)
        _, stop = eng.prompt_for(req)
        assert stop == ("zz",)  # ignore_eos decodes exactly max_tokens: only the request's own stops
        talk = GenerationSettings(max_tokens=4, temperature=0, stop=("zz",))
        _, stop = eng.prompt_for(SlotRequest("c", settings=talk, build_prompt=build))
        assert stop == (*eng.format.stop, "zz")  # the format's, then the request's
        calls.clear()
        expected = eng.to_tokens(history[-1:])
        assert expected == eng.prompt_for(SlotRequest("m", history[-1:]))[0]
        eng.submit_many([req])
        res = eng.run()
    finally:
        eng.free()
    assert len(calls) == 1
    slot_ctx, toks, thread = calls[0]
    assert slot_ctx == eng.slot_ctx and toks == expected and thread is threading.current_thread()
    assert len(res) == 1 and res[0].ok and res[0].stats.completion_tokens == 4
    assert res[0].stats.prompt_tokens == len(toks) < len(eng.to_tokens(history))


def test_error_results_carry_a_typed_kind(model):
    def overflow(_slot_ctx, _to_tokens):
        raise ContextOverflowError("the message is too long")

    def broken(_slot_ctx, _to_tokens):
        raise RuntimeError("a bug in the caller")

    eng = _engine(model, 2)
    try:
        eng.submit_many([raw(model, 0, "word " * 1000, fixed(4)),
                         SlotRequest("bad", [MessageBody("user", "Hi.")], GenerationSettings(top_p=0)),
                         SlotRequest("fit", build_prompt=overflow),
                         SlotRequest("bug", build_prompt=broken),
                         SlotRequest("empty", prompt_tokens=[]),
                         raw(model, 5, "Hi.", fixed(2))])
        res = {r.custom_id: r.stats for r in eng.run()}
    finally:
        eng.free()
    kinds = {k: st.error_kind for k, st in res.items()}
    assert kinds == {"r0": "context_overflow", "bad": "invalid_request", "fit": "context_overflow",
                     "bug": "invalid_request", "empty": "invalid_request", "r5": None}
    assert f"a batch slot holds {eng.slot_ctx}" in res["r0"].error and "top_p" in res["bad"].error
    assert "RuntimeError: a bug in the caller" in res["bug"].error
    assert all(st.stop_reason == "error" and st.slot is None for k, st in res.items() if k != "r5")
    assert res["r5"].error is None and res["r5"].completion_tokens == 2


def test_online_request_takes_the_next_free_slot_and_streams(model):
    started: list[str] = []
    first_batch = threading.Event()

    def on_event(ev):
        if isinstance(ev, RequestStarted):
            started.append(ev.custom_id)
            first_batch.set()

    eng = _engine(model, 2, on_event=on_event)
    deltas: list[str] = []
    finished: list[Finished] = []
    try:
        eng.submit_many([ask(i, f"Tell me about {t}.", fixed(12)) for i, t in enumerate(TOPICS[:6])])
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("res", eng.run()), daemon=True)
        t.start()
        assert first_batch.wait(30)
        n_before = len(started)
        online = SlotRequest("chat", [MessageBody("user", "What is bread?")], fixed(6),
                              on_event=lambda e: deltas.append(e.text) if isinstance(e, TextDelta)
                              else finished.append(e) if isinstance(e, Finished) else None)
        eng.submit_online(online)
        t.join(60)
        assert not t.is_alive()
    finally:
        eng.free()
    # Batch requests were still queued, yet the online one got the next slot.
    assert started.index("chat") == max(n_before, 2)
    res = {r.custom_id: r for r in out["res"]}
    chat = res["chat"]
    assert chat.stats.online and chat.stats.slot == 2  # the reserved sequence: no wait for a batch slot
    assert chat.stats.ttft_from_queue_s is not None
    assert "".join(deltas) == chat.text and finished and finished[0].text == chat.text
    assert finished[0].stats.decode_tokens == 6
    assert len(res) == 7


def test_pause_keeps_batch_slots_while_online_runs_and_cancel_drops_the_rest(model):
    progress: list[BatchProgress] = []
    done: list[str] = []

    def on_event(ev):
        if isinstance(ev, BatchProgress):
            progress.append(ev)
        elif isinstance(ev, RequestDone):
            done.append(ev.result.custom_id)
            if ev.result.custom_id == "chat":
                eng.cancel()

    eng = _engine(model, 2, on_event=on_event)
    try:
        eng.submit_many([raw(model, i, "Tell me a story.", fixed(200)) for i in range(4)])
        eng.pause()
        eng.submit_online(SlotRequest("chat", [MessageBody("user", "Hi.")], fixed(4)))
        results = eng.run()
    finally:
        eng.free()
    # Paused: nothing of the batch was admitted; the online request ran alone and finished.
    assert done == ["chat"]
    assert [r.custom_id for r in results] == ["chat"] and results[0].stats.completion_tokens == 4
    assert any(p.paused and p.busy_slots == 1 and p.queued == 4 for p in progress)
    assert progress[-1].done == 1 and progress[-1].total == 5


def test_kept_prefixes_send_a_next_turn_to_its_slot_and_prefill_only_what_is_new(model):
    eng = _engine(model, 3, keep_prefixes=True)
    try:
        first = [MessageBody("user", "Tell me about the sea in one sentence.")]
        other = [MessageBody("user", "Name a fruit.")]
        eng.submit_many([SlotRequest("a", first, fixed(8)), SlotRequest("b", other, fixed(8))])
        done = {r.custom_id: r for r in eng.run()}
        turn2 = [*first, MessageBody("assistant", done["a"].text),
                 MessageBody("user", "And the mountains?")]
        eng.submit_many([SlotRequest("a2", turn2, fixed(6))])
        (r2,) = eng.run()
        toks, _ = eng.prompt_for(SlotRequest("x", turn2, fixed(6)))
        first_toks, _ = eng.prompt_for(SlotRequest("y", first, fixed(8)))
    finally:
        eng.free()
    assert r2.stats.error is None and r2.text
    assert r2.stats.slot == done["a"].stats.slot  # the slot that holds its history
    # At least the first turn's prompt was kept; what follows it was prefilled.
    assert len(first_toks) - 1 <= r2.stats.cached_tokens < len(toks)
    assert r2.stats.prompt_tokens == len(toks)


def test_without_kept_prefixes_nothing_is_reused(model):
    eng = _engine(model, 2)
    try:
        msgs = [MessageBody("user", "Tell me about the sea in one sentence.")]
        eng.submit_many([SlotRequest("a", msgs, fixed(4))])
        eng.run()
        eng.submit_many([SlotRequest("b", msgs, fixed(4))])
        (r,) = eng.run()
    finally:
        eng.free()
    assert r.stats.cached_tokens == 0


def test_progress_carries_the_batched_ceiling_of_the_sequences_decoding(model):
    seen: list[BatchProgress] = []
    eng = _engine(model, 4, on_event=lambda ev: seen.append(ev) if isinstance(ev, BatchProgress) else None)
    prompt = "Write about " + ", ".join(TOPICS) + "."  # a prompt of dozens of tokens: a pure prefill step
    try:
        eng.submit_many([raw(model, i, prompt, fixed(48)) for i in range(4)])
        eng.run()
    finally:
        eng.free()
    assert eng.flop_s and eng.flop_s > 0, "a pure prefill step measured the arithmetic rate"
    with_ceiling = [p for p in seen if p.ceiling_tok_s]
    assert with_ceiling and all(p.decoding >= 1 and p.ceiling_bound in ("bandwidth", "arithmetic")
                                for p in with_ceiling)
    # How far four sequences lift the ceiling is the CPU's business (bench --batch reports it):
    # here only what holds on any machine. The arithmetic bound only rises as faster prefill
    # steps are measured, so the run's best bounds every figure shown during it.
    lim = eng.limits
    single = lim.at(len(model.llm.tokenize(prompt.encode())), None)[2]
    bandwidth_bound = 4 * lim.peak / lim.weights  # four tokens per read of the weights, no KV at all
    arithmetic_bound = eng.flop_s / (2.0 * lim.decode_params)
    four = [p for p in with_ceiling if p.decoding == 4]
    assert four
    for p in four:
        assert 0 < p.ceiling_tok_s <= min(bandwidth_bound, arithmetic_bound) * (1 + 1e-9)
        if p.ceiling_bound == "bandwidth":
            assert p.ceiling_tok_s > single  # one read of the weights, four tokens


def test_a_verbatim_request_is_the_trimmed_one_with_its_whitespace_kept(model):
    toks = model.llm.tokenize(b"User: Hello\nAssistant:")
    texts = {}
    for verbatim in (False, True):
        eng = _engine(model, 1)
        try:
            eng.submit_many([SlotRequest("r", prompt_tokens=toks, settings=fixed(12), verbatim=verbatim)])
            texts[verbatim] = eng.run()[0].text
        finally:
            eng.free()
    assert texts[True].strip() == texts[False] and texts[False]


def test_an_online_request_cuts_a_batch_only_step_short_and_the_batch_loses_nothing(model, caplog):
    """The server's policy (keep_prefixes): a step of batch tokens is aborted when an online
    request arrives, rolled back whole by llama.cpp, and decoded again after it."""
    import logging

    busy = threading.Event()
    eng = _engine(model, 4, keep_prefixes=True,
                  on_event=lambda ev: busy.set() if isinstance(ev, BatchProgress) and ev.busy_slots == 4
                  else None)
    caplog.set_level(logging.DEBUG, logger="llamadesk.llama_cpp")
    try:
        eng.submit_many([raw(model, i, f"Tell me about {t}.", fixed(60)) for i, t in enumerate(TOPICS[:4])])
        out: dict = {}
        t = threading.Thread(target=lambda: out.setdefault("res", eng.run()), daemon=True)
        t.start()
        assert busy.wait(30)
        for k in range(3):  # online requests while every batch slot decodes
            eng.submit_online(SlotRequest(f"o{k}", [MessageBody("user", "Name a colour.")], fixed(4)))
            time.sleep(0.3)
        t.join(120)
        assert not t.is_alive()
    finally:
        eng.free()
    res = {r.custom_id: r for r in out["res"]}
    assert eng.aborted_steps >= 1, "no batch step was cut short"
    assert all(res[f"r{i}"].ok and res[f"r{i}"].stats.completion_tokens == 60 for i in range(4))
    assert all(res[f"o{k}"].ok and res[f"o{k}"].stats.completion_tokens == 4 for k in range(3))
    # The rollback's messages are expected, so they are not warnings or errors in the log.
    loud = [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and ("decode" in r.getMessage() or "compute" in r.getMessage())]
    assert not loud, loud
