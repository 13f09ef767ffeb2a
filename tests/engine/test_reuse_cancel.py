"""Prefix reuse across turns, honest cache reporting, and cancellation."""

from __future__ import annotations

import threading
import time

from app.chat.local_engine import LocalChatEngine
from app.engine.control import CancelToken, common_prefix
from app.engine.events import PrefillStarted, TextDelta
from app.engine.loader import LoadOptions
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings

GREEDY = GenerationSettings(max_tokens=12, temperature=0)


def test_next_turn_prefills_only_new_tokens(engine):
    engine.decoder.reset()
    first = engine.reply([], "What is the capital of France?", GREEDY, system="Be brief.")
    in_cache = list(engine.decoder.tokens)
    history = [MessageBody("user", "What is the capital of France?"),
               MessageBody("assistant", first.text)]
    prompt2 = engine.prompt_tokens([MessageBody("system", "Be brief."), *history,
                                    MessageBody("user", "And Spain?")])
    second = engine.reply(history, "And Spain?", GREEDY, system="Be brief.")
    s = second.stats
    assert s.cached_tokens == common_prefix(in_cache, prompt2)
    assert s.cached_tokens >= first.stats.prompt_tokens  # the whole first prompt was reused
    assert s.prefill_tokens == s.prompt_tokens - s.cached_tokens
    assert s.prefill_tokens < 20


def test_template_that_rerenders_history_reports_real_match(model_path):
    """A template that renders the latest user turn unlike older ones breaks the match there."""
    template = (
        "{% for m in messages %}{% if loop.last %}<<{{ m.content }}>>{% else %}"
        "[{{ m.role }}: {{ m.content }}]{% endif %}{% endfor %} Answer:"
    )
    eng = LocalChatEngine.open(model_path, LoadOptions(n_ctx=512, chat_template=template))
    try:
        assert eng.notice is None and eng.format.name == "chat template"
        q1 = "Name a colour of the sky on a clear summer day."
        first = eng.reply([], q1, GREEDY)
        in_cache = list(eng.decoder.tokens)
        history = [MessageBody("user", q1), MessageBody("assistant", first.text)]
        prompt2 = eng.prompt_tokens([*history, MessageBody("user", "And at night?")])
        second = eng.reply(history, "And at night?", GREEDY)
        expected = common_prefix(in_cache, prompt2)
        assert second.stats.cached_tokens == expected
        assert expected < first.stats.prompt_tokens, "the re-rendered first turn must break the match"
        assert second.stats.prefill_tokens == len(prompt2) - expected
    finally:
        eng.close()


def test_cancel_during_decode_stops_within_one_token(engine):
    engine.decoder.reset()
    cancel = CancelToken()
    seen = []

    def on_event(e):
        if isinstance(e, TextDelta):
            seen.append(e.generated)
            if len(seen) == 5:
                cancel.cancel()

    r = engine.reply([], "Tell me a long story.", GenerationSettings(max_tokens=200, temperature=0,
                                                                       ignore_eos=True),
                     on_event=on_event, cancel=cancel)
    assert r.stats.stop_reason == "cancelled"
    assert r.stats.decode_tokens <= seen[4] + 1
    assert r.text and r.text == r.text.strip()
    # The engine is still usable and the cache matches what it says it holds.
    again = engine.reply([], "Hi", GREEDY)
    assert again.stats.stop_reason in ("stop", "length")


def test_cancel_during_long_prefill_within_250ms(engine):
    engine.decoder.reset()
    cancel = CancelToken()
    started = threading.Event()
    stamp = {}

    def on_event(e):
        if isinstance(e, PrefillStarted):
            started.set()

    def canceller():
        started.wait(10)
        time.sleep(0.15)
        stamp["t"] = time.perf_counter()
        cancel.cancel()

    t = threading.Thread(target=canceller)
    t.start()
    long_text = "The quick brown fox jumps over the lazy dog. " * 170  # ~1,700 tokens
    r = engine.reply([], long_text, GenerationSettings(max_tokens=8), on_event=on_event, cancel=cancel)
    returned = time.perf_counter()
    t.join()
    assert r.stats.stop_reason == "cancelled" and r.text == ""
    assert returned - stamp["t"] < 0.25, f"took {returned - stamp['t']:.3f} s to stop"
    assert r.stats.prefill_tokens < r.stats.prompt_tokens
    # What was evaluated before the abort is kept and honestly reused next time.
    kept = len(engine.decoder.tokens)
    assert engine.decoder.kv_used() == kept
    again = engine.reply([], long_text, GenerationSettings(max_tokens=2))
    assert again.stats.cached_tokens == kept
