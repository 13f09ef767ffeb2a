"""The streaming split of a thinking model's reply: llama.cpp's test-chat.cpp reasoning cases,
fed whole, one character at a time, and cut at every point a tag could be split."""

from __future__ import annotations

import pytest

from app.engine.reasoning_formats import FORMATS
from app.engine.reasoning_split import ReasoningSplitter

FMT = {f.name: f for f in FORMATS}
THOUGHTS = ("I'm\nthinking", "Hello, world!\nWhat's up?")  # test-chat.cpp's message_assist_thoughts

# (format, the prompt opened the reasoning, the reply as streamed, reasoning, answer)
CASES = [
    # Qwen3 / QwQ / R1: <think> written by the model, or opened by the prompt (Qwen3.5).
    ("think-tags", False, "<think>\nI'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", *THOUGHTS),
    ("think-tags", True, "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", *THOUGHTS),
    ("think-tags", True, "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", *THOUGHTS),
    ("think-tags", False, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?"),
    ("think-tags", False, "<think>\n\n</think>\n\nHello, world!", "", "Hello, world!"),
    # A reply that never closes its reasoning keeps all of it as reasoning.
    ("think-tags", True, "I'm\nthinking and thinking", "I'm\nthinking and thinking", ""),
    ("think-tags", False, "<think>I'm\nthinking </thi", "I'm\nthinking </thi", ""),
    # A tag written in the middle of an answer is the answer's text.
    ("think-tags", False, "Use <think> tags", "", "Use <think> tags"),
    # Ministral Reasoning.
    ("think-brackets", False, "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?", *THOUGHTS),
    ("think-brackets", False, "Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?"),
    ("think-brackets", False, "[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]"
     "{\"arg1\":1} and more[/THINK]ok",
     "Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more", "ok"),
    # gpt-oss harmony: channels; the final channel's header is neither reasoning nor answer.
    ("harmony", False, "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
     "<|channel|>final<|message|>Hello, world!\nWhat's up?", *THOUGHTS),
    ("harmony", False, "<|channel|>final<|message|>Hello, world!\nWhat's up?", "",
     "Hello, world!\nWhat's up?"),
    ("harmony", False, "<|channel|>commentary<|message|>Hello, world!\nWhat's up?", "",
     "Hello, world!\nWhat's up?"),
    ("harmony", False, "<|channel|>analysis<|message|>I'm\nthinking", "I'm\nthinking", ""),
    # Gemma 4's thought channel, and the empty one a budget of 0 leaves.
    ("gemma4", False, "<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", *THOUGHTS),
    ("gemma4", False, "<|channel>thought<channel|>Hello, world!\nWhat's up?", "",
     "Hello, world!\nWhat's up?"),
]


def split(fmt, opened, pieces):
    s = ReasoningSplitter(FMT[fmt], opened)
    out = [s.feed(p) for p in pieces] + [s.finish()]
    r, a = "".join(x for x, _ in out), "".join(y for _, y in out)
    assert (r, a) == (s.reasoning, s.answer)  # the deltas add up to the whole
    return r, a, s


@pytest.mark.parametrize(("fmt", "opened", "text", "reasoning", "answer"), CASES)
def test_whole_and_one_character_at_a_time(fmt, opened, text, reasoning, answer):
    assert split(fmt, opened, [text])[:2] == (reasoning, answer)
    assert split(fmt, opened, list(text))[:2] == (reasoning, answer)


@pytest.mark.parametrize(("fmt", "opened", "text", "reasoning", "answer"), CASES)
def test_cut_anywhere_into_three(fmt, opened, text, reasoning, answer):
    n = len(text)
    for i in range(n + 1):
        for j in range(i, min(n, i + 12) + 1):
            assert split(fmt, opened, [text[:i], text[i:j], text[j:]])[:2] == (reasoning, answer), (i, j)


def test_the_answer_streams_before_the_reply_ends():
    s = ReasoningSplitter(FMT["think-tags"])
    assert s.feed("<think>a plan") == ("a plan", "")
    assert s.feed(" </th") == ("", "")  # could be the end tag: held
    assert not s.closed
    assert s.feed("ink>\n\nThe ans") == ("", "The ans")
    assert s.closed
    assert s.feed("wer") == ("", "wer")


def test_a_reply_that_opens_no_reasoning_is_not_closed():
    _, _, s = split("think-tags", False, ["Plain answer."])
    assert not s.closed and not s.had_reasoning
