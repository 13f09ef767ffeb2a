"""Streaming events, full-response mode, and agreement with llama.cpp's counters."""

from __future__ import annotations

import itertools

import llama_cpp

from app.engine.events import Finished, FirstToken, PrefillStarted, Progress, TextDelta
from app.engine.message import MessageBody
from app.engine.prompt_cache import clear_cache
from app.engine.sampling import GenerationSettings

STORY = GenerationSettings(max_tokens=60, temperature=0, ignore_eos=True, repeat_penalty=1.0)


def _run(engine, text="Tell me a story about a dragon.", settings=STORY):
    """Decode without the transcript's stop string, so the reply runs its full length."""
    events = []
    engine.decoder.reset()
    prompt = engine.prompt_tokens([MessageBody("user", text)])
    reply = engine.decoder.generate(prompt, settings, on_event=events.append)
    return reply, events


def test_events_arrive_in_order_and_deltas_add_up(engine):
    reply, events = _run(engine)
    kinds = [type(e) for e in events]
    assert kinds[0] is PrefillStarted and kinds[-1] is Finished
    first_delta = kinds.index(TextDelta)
    assert FirstToken in kinds[:first_delta]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 10, "a 60-token reply must stream in many steps"
    assert "".join(d.text for d in deltas) == reply.text == events[-1].text
    assert [d.generated for d in deltas] == sorted(d.generated for d in deltas)


def test_full_response_mode_gets_same_text_and_stats_shape(engine):
    """Full mode consumes no deltas; the reply and its counts are the same.

    Both from the same cache state (empty, and nothing on disk): a prefix loaded
    from the prompt cache would make the second a different batch shape."""
    engine.decoder.reset()
    clear_cache()
    streamed = engine.reply([], "Tell me a story about a dragon.", STORY, on_event=lambda e: None)
    engine.decoder.reset()
    clear_cache()
    whole = engine.reply([], "Tell me a story about a dragon.", STORY)
    assert whole.text == streamed.text
    for field in ("prefill_tokens", "cached_tokens", "decode_tokens", "kv_used", "stop_reason"):
        assert getattr(whole.stats, field) == getattr(streamed.stats, field)


def test_stats_agree_with_llama_cpp_counters_and_memory(engine):
    reply, events = _run(engine)
    s = reply.stats
    done = events[-1]
    assert s.decode_tokens == len(done.tokens) == 60 and s.stop_reason == "length"
    assert s.prefill_tokens + s.cached_tokens == s.prompt_tokens
    # The last sampled token is never evaluated, so the cache holds one less.
    assert s.kv_used == s.prompt_tokens + s.decode_tokens - 1
    assert s.kv_used == engine.decoder.kv_used() == len(engine.decoder.tokens)
    perf = llama_cpp.llama_perf_context(engine.decoder.ctx)
    evaluated = (perf.n_p_eval if perf.t_p_eval_ms > 0 else 0) + perf.n_eval
    assert evaluated == s.prefill_tokens + s.decode_tokens - 1
    gap = abs(s.decode_tok_s - s.wall_decode_tok_s) / s.wall_decode_tok_s
    assert gap < 0.3, f"llama.cpp says {s.decode_tok_s:.1f} tok/s, the wall clock {s.wall_decode_tok_s:.1f}"
    assert 0 < s.ttft_s <= s.total_s and s.prefill_s > 0 and s.decode_s > 0
    assert s.n_ctx == engine.n_ctx


def test_live_progress_at_least_four_times_a_second(engine):
    """Progress goes out every 0.2 s, or at the next token when a step is slower.

    The bound is relative to the token steps of the same run, so a loaded
    machine cannot fail it while a missing update still does.
    """
    settings = GenerationSettings(max_tokens=150, temperature=0, ignore_eos=True)
    reply, events = _run(engine, settings=settings)
    steps = []
    for e in events:
        if isinstance(e, TextDelta):
            steps.append(e.t)
    live = [e for e in events if isinstance(e, Progress) and e.phase == "decode"]
    assert len(live) >= 4
    marks = [e.elapsed_s for e in live]
    longest_step = max(b - a for a, b in itertools.pairwise(steps))
    longest_gap = max(b - a for a, b in itertools.pairwise(marks))
    assert longest_gap < 0.2 + 2 * longest_step, (longest_gap, longest_step)
    assert all(e.rate_tok_s and e.rate_tok_s > 0 for e in live)
    assert [e.kv_used for e in live] == sorted(e.kv_used for e in live)
    assert live[-1].generated <= reply.stats.decode_tokens
