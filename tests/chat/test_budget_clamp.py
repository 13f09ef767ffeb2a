"""A context too small for max tokens limits the reply instead of refusing the message.

With ctx 512 and max tokens 512 nothing could be sent, and the refusal counted
the preamble as "the message". Now history is cut only until the reply has
half the context, the reply gets the room that is left and says so, and only a
prompt that leaves no room is refused, naming what its count includes.
"""

from __future__ import annotations

import pytest

from app.chat.budget import REPLY_SHARE, fit_history
from app.engine.errors import ContextOverflowError
from app.engine.events import PrefillStarted
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings

SYSTEM = "You are terse."


def history(turns: int) -> list[MessageBody]:
    out = []
    for i in range(turns):
        out += [MessageBody("user", f"Question {i}: tell me about the sea " * 3),
                MessageBody("assistant", f"Answer {i}: the sea is wide and deep " * 4)]
    return out


def test_max_tokens_as_large_as_the_context_keeps_history_while_the_reply_has_half(engine):
    past = history(8)
    fit = fit_history(SYSTEM, past, "And now?", 512, 512, engine.prompt_tokens)
    half = REPLY_SHARE * 512 // 100
    # Turns go only until the reply has half the context; it gets all the room that is left.
    assert 0 < len(fit.dropped) < len(past) and len(fit.tokens) + half <= 512
    cut = len(fit.dropped)
    one_fewer = engine.prompt_tokens([MessageBody("system", SYSTEM), *past[cut - 2:],
                                      MessageBody("user", "And now?")])
    assert len(one_fewer) + half > 512, "the cut is the first that fits, not a turn too many"
    assert fit.budget == 512 - len(fit.tokens) >= half and fit.limit(512) == fit.budget
    short = fit_history(SYSTEM, history(1), "And now?", 512, 512, engine.prompt_tokens)
    assert short.dropped == [] and short.budget == 512 - len(short.tokens)  # nothing dropped needlessly


def test_a_budget_the_context_holds_is_kept_whole(engine):
    fit = fit_history(SYSTEM, history(4), "And now?", 64, 2048, engine.prompt_tokens)
    assert fit.dropped == [] and fit.budget == 64 and fit.limit(64) is None


def test_only_a_prompt_with_no_room_left_is_refused_and_the_count_says_what_it_holds(engine):
    msgs = [MessageBody("system", SYSTEM), MessageBody("user", "And now?")]
    n = len(engine.prompt_tokens(msgs))
    edge = fit_history(SYSTEM, history(2), "And now?", 512, n + 1, engine.prompt_tokens)
    assert edge.budget == 1 and edge.limit(512) == 1  # one token of room is room
    with pytest.raises(ContextOverflowError) as e:
        fit_history(SYSTEM, history(2), "And now?", 512, n, engine.prompt_tokens)
    assert f"the prompt is {n} tokens (system prompt, template and your message)" in str(e.value)
    assert f"the context holds {n}" in str(e.value) and "max" not in str(e.value)
    alone = len(engine.prompt_tokens([MessageBody("user", "And now?")]))
    with pytest.raises(ContextOverflowError) as e:
        fit_history(None, [], "And now?", 8, alone, engine.prompt_tokens)
    assert f"the prompt is {alone} tokens (template and your message)" in str(e.value)


@pytest.fixture(scope="module")
def small_engine(model_path):
    from app.chat.local_engine import LocalChatEngine
    from app.engine.loader import LoadOptions

    eng = LocalChatEngine.open(model_path, LoadOptions(n_ctx=256), prompt_cache=False)
    yield eng
    eng.close()


def test_a_real_reply_limited_by_the_context_says_so(small_engine):
    eng = small_engine
    for n in range(30, 0, -1):  # a message that leaves the reply a handful of tokens
        text = "Describe the harbour. " + "Boats rest by the pier at dusk. " * n
        prompt = len(eng.prompt_tokens([MessageBody("user", text)]))
        if prompt <= eng.n_ctx - 8:
            break
    assert prompt > eng.n_ctx - 24, prompt
    events: list = []
    st = eng.reply(history(2), text, GenerationSettings(max_tokens=512, temperature=0, ignore_eos=True),
                   on_event=events.append).stats
    room = eng.n_ctx - prompt
    assert st.prompt_tokens == prompt and st.dropped_messages == 4  # the reply kept its room
    assert st.reply_limit == room == st.decode_tokens and st.stop_reason == "length"
    assert st.kv_used <= eng.n_ctx
    assert next(e for e in events if isinstance(e, PrefillStarted)).reply_budget == room
    footer = st.summary()
    assert f"reply limited to {room} tokens by the context" in footer
    assert "the context's limit reached" in footer and "max tokens reached" not in footer
    assert st.to_json()["reply_limit"] == room
