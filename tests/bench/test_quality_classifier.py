"""The reply classifier behind `llamadesk bench --quality`, on hand-made replies of each kind."""

from __future__ import annotations

import pytest

from app.bench.quality_set import CHATS, KINDS, PROMPTS, classify

Q = "How do I boil an egg?"
EARLIER = ("Write a sentence about a bicycle.",
           "My old red bicycle leans against the garden wall every single summer evening.")


@pytest.mark.parametrize(("reply", "kind"), [
    ("", "empty"),
    ("  \n ", "empty"),
    ("How do I boil an egg?", "echo"),
    ("how do i boil an egg? You put it in water.", "echo"),
    ("Sure. How do I boil an egg? Put it in boiling water.", "echo"),
    ("Put it in boiling water for eight minutes.\nUser: thanks", "role_marker"),
    ("Put it in water.\nStudent: Why?", "role_marker"),
    ("Put it in water.\n  assistant : and wait", "role_marker"),
    ("Q: what next?", "role_marker"),
    ("My old red bicycle leans against the garden wall every single day.", "copy"),
    ("Put the egg in boiling water for eight minutes, then cool it.", "ok"),
    ("A bicycle is fun, and an egg is food.", "ok"),  # shared words, no run of eight
])
def test_each_kind(reply, kind):
    assert classify(reply, Q, EARLIER) == kind


def test_short_questions_echo_only_at_the_start():
    assert classify("Why? Because it is.", "Why?") == "echo"
    assert classify("It is blue, why?", "Why?") == "ok"


def test_the_set_is_the_size_the_bench_reports():
    assert len(PROMPTS) >= 40 and len(CHATS) >= 20
    assert len(set(PROMPTS)) == len(PROMPTS) and len({c[0] for c in CHATS}) == len(CHATS)
    assert KINDS[-1] == "ok"
