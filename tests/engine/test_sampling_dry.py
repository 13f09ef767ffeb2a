"""DRY and the repeat penalty judge a reply against the prompt too, so copying an earlier turn counts."""

from __future__ import annotations

import pytest

from app.bench.quality_set import COPY_RUN, words
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings

EARLIER = "The quick brown fox jumps over the lazy dog near the old river bank every morning."


def test_dry_keeps_a_reply_from_copying_an_earlier_turn(engine):
    history = [MessageBody("user", "Say something about a fox."), MessageBody("assistant", EARLIER)]
    settings = GenerationSettings(max_tokens=40, temperature=0, repeat_penalty=1.0, dry_multiplier=3.0,
                                  dry_allowed_length=2)
    reply = engine.reply(history, "Now say exactly the same sentence again, word for word.", settings)
    assert reply.stats.decode_tokens > 0
    got, before = words(reply.text), words(EARLIER)
    runs = {tuple(before[i:i + COPY_RUN]) for i in range(len(before) - COPY_RUN + 1)}
    assert not any(tuple(got[i:i + COPY_RUN]) in runs for i in range(len(got) - COPY_RUN + 1)), reply.text


@pytest.mark.parametrize(("field", "value"), [("dry_multiplier", -1.0), ("dry_base", 0.5),
                                              ("dry_allowed_length", -1), ("dry_last_n", -2),
                                              ("preamble", "yes"), ("penalize_prompt", 1)])
def test_bad_dry_and_preamble_settings_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        GenerationSettings(**{field: value}).validate()


def test_the_preamble_setting_changes_the_prompt_and_off_is_the_bare_transcript(engine):
    on = engine.prompt_tokens([MessageBody("user", "Hi")], preamble=True)
    off = engine.prompt_tokens([MessageBody("user", "Hi")], preamble=False)
    assert len(off) < len(on) and engine.decoder.tokenize("User: Hi\nAssistant:") == off
    reply = engine.reply([], "Hi", GenerationSettings(max_tokens=2, temperature=0, preamble=False))
    assert reply.stats.prompt_tokens == len(off)
