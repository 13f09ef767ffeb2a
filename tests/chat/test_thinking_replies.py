"""Thinking replies end to end on the real bundled model, its GGUF given a thinking model's
chat template. The base model knows no thinking format, so a grammar holds each reply to the
template's; the split, the events and the counts are then checked against the tokens the
model really drew. Left alone it never closes its reasoning, which the budget tests rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.local_engine import LocalChatEngine
from app.engine.events import Finished, FirstToken, ReasoningDelta, TextDelta
from app.engine.grammar import Constraint
from app.engine.loader import LoadOptions
from app.engine.reasoning import BUDGET_MESSAGE
from app.engine.sampling import GenerationSettings
from tests.gguf_templates import with_chat_template

TEMPLATES = Path(__file__).parent.parent / "data" / "templates"
ANSWER = r"[A-Z][a-z]{2,8}( [a-z]{2,8}){1,4}\."


@pytest.fixture(scope="module")
def models(tmp_path_factory, model_path):
    made: dict[str, Path] = {}

    def model(name: str) -> Path:
        if name not in made:
            out = tmp_path_factory.mktemp("thinking") / f"{name}.gguf"
            made[name] = with_chat_template(model_path, out, (TEMPLATES / f"{name}.jinja").read_text())
        return made[name]
    return model


@pytest.fixture
def open_engine(models):
    opened = []

    def open_(name: str) -> LocalChatEngine:
        eng = LocalChatEngine.open(models(name), LoadOptions(n_ctx=1024), prompt_cache=False)
        opened.append(eng)
        return eng
    yield open_
    for eng in opened:
        eng.close()


def ask(eng: LocalChatEngine, settings: GenerationSettings):
    events: list = []
    reply = eng.reply([], "What is the capital of France?", settings, on_event=events.append)
    return reply, events


def settings(regex: str | None = None, **kw) -> GenerationSettings:
    return GenerationSettings(temperature=0, max_tokens=kw.pop("max_tokens", 40),
                              constraint=Constraint("regex", regex) if regex else None, **kw)


def check_stream(reply, events) -> Finished:
    """The events tell the same reply: deltas add up, Finished carries the answer alone, the
    first shown text is TTFT and the answer's first is TTFA."""
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == reply.reasoning
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == reply.text
    done = events[-1]
    assert isinstance(done, Finished) and done.text == reply.text
    assert sum(isinstance(e, FirstToken) for e in events) == 1
    st = reply.stats
    assert st.ttft_s is not None and st.ttfa_s is not None and st.ttfa_s > st.ttft_s
    assert 0 < st.reasoning_s < st.total_s
    return done


def text_of(eng: LocalChatEngine, tokens) -> str:
    return eng.decoder.llm.detokenize(list(tokens), special=True).decode("utf-8", "replace")


@pytest.mark.parametrize(("template", "think", "reply_regex", "end"), [
    # Qwen3.5's prompt opens <think>: the reply starts inside its reasoning.
    ("Qwen3.5-4B", True, r"[a-z]{3,8}( [a-z]{2,8}){2,5}\n</think>\n\n" + ANSWER, "</think>"),
    # Qwen3 leaves <think> to the model.
    ("Qwen-Qwen3-0.6B", None, r"<think>\n[a-z]{3,8}( [a-z]{2,8}){2,5}\n</think>\n\n" + ANSWER,
     "</think>"),
    ("mistralai-Ministral-3-14B-Reasoning-2512", None,
     r"\[THINK\][a-z]{3,8}( [a-z]{2,8}){2,5}\[/THINK\]" + ANSWER, "[/THINK]"),
    ("openai-gpt-oss-120b", "low", r"<\|channel\|>analysis<\|message\|>[a-z]{3,8}( [a-z]{2,8}){2,5}"
     r"<\|end\|><\|start\|>assistant<\|channel\|>final<\|message\|>" + ANSWER, "<|end|>"),
    ("google-gemma-4-31B-it", True,
     r"<\|channel>thought\n[a-z]{3,8}( [a-z]{2,8}){2,5}<channel\|>" + ANSWER, "<channel|>"),
], ids=["qwen3.5", "qwen3", "ministral-reasoning", "gpt-oss", "gemma4"])
def test_a_reply_held_to_the_format_is_split_and_counted(open_engine, template, think, reply_regex, end):
    eng = open_engine(template)
    assert eng.thinking is not None
    reply, events = ask(eng, settings(reply_regex, think=think, max_tokens=60))
    done = check_stream(reply, events)
    assert reply.stats.stop_reason == "stop"
    # The reasoning is the words between the markers, the answer the sentence after them.
    assert reply.reasoning and all(w.isalpha() and w.islower() for w in reply.reasoning.split())
    assert reply.text[0].isupper() and reply.text.endswith(".") and end not in reply.text
    # reasoning_tokens: the tokens drawn up to and including the end marker, from the real tokens.
    n = reply.stats.reasoning_tokens
    assert 0 < n < reply.stats.decode_tokens
    assert text_of(eng, done.tokens[:n]).endswith(end)
    assert end not in text_of(eng, done.tokens[:n - 1])
    assert reply.text in text_of(eng, done.tokens[n:])


def test_switched_off_the_template_closes_the_reasoning_in_the_prompt(open_engine):
    eng = open_engine("Qwen-Qwen3-0.6B")
    reply, events = ask(eng, settings(ANSWER, think=False))
    prompt = eng.format.render([eng_msg("What is the capital of France?")], True, {"enable_thinking": False})
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert reply.reasoning == "" and reply.text[0].isupper()
    assert not any(isinstance(e, ReasoningDelta) for e in events)
    assert reply.stats.reasoning_tokens is None and reply.stats.reasoning_s is None
    assert reply.stats.ttfa_s == pytest.approx(reply.stats.ttft_s)


def eng_msg(text):
    from app.engine.message import MessageBody
    return MessageBody("user", text)


@pytest.mark.parametrize("budget", [0, 5])
def test_the_budget_forces_the_message_and_the_end_then_the_answer_starts(open_engine, budget):
    eng = open_engine("Qwen3.5-4B")
    forced = eng.decoder.tokenize(BUDGET_MESSAGE + "</think>", add_bos=False, special=True)
    reply, events = ask(eng, settings(think=True, think_budget=budget,
                                      max_tokens=budget + len(forced) + 6))
    done = check_stream(reply, events)
    # The base model never closes on its own: the reasoning ends exactly at the budget plus the
    # forced message and end marker, drawn token for token.
    assert reply.stats.reasoning_tokens == budget + len(forced)
    assert list(done.tokens[budget:budget + len(forced)]) == forced
    assert reply.reasoning.endswith(BUDGET_MESSAGE.strip())
    # The answer is what the model drew after them (copying the tag it just saw, as it may).
    assert reply.text and reply.text in text_of(eng, done.tokens[budget + len(forced):])
    assert reply.stats.decode_tokens == budget + len(forced) + 6


def test_without_a_budget_the_unclosed_reasoning_is_all_reasoning(open_engine):
    eng = open_engine("Qwen3.5-4B")
    reply, events = ask(eng, settings(r"[a-z]{3,8}( [a-z]{2,8}){20,30}", think=True, max_tokens=12))
    assert reply.stats.stop_reason == "length"
    assert reply.reasoning and reply.text == ""
    assert reply.stats.reasoning_tokens == reply.stats.decode_tokens == 12
    assert reply.stats.ttfa_s is None
    assert not any(isinstance(e, TextDelta) for e in events)


def test_the_forced_end_keeps_to_the_replys_format(open_engine):
    eng = open_engine("Qwen3.5-4B")
    forced = eng.decoder.tokenize(BUDGET_MESSAGE + "</think>", add_bos=False, special=True)
    # The format lets the reasoning end only after the budget's own words, so the model cannot
    # close it first; the forced tokens must then pass the grammar, and the answer keep to it.
    reply, events = ask(eng, settings(r"[^<]*time to answer\.\n</think>\n\n[A-Z][a-z]{2,8}\.", think=True,
                                      think_budget=4,
                                      max_tokens=4 + len(forced) + 12))
    done = check_stream(reply, events)
    assert reply.stats.reasoning_tokens == 4 + len(forced)
    assert list(done.tokens[4:4 + len(forced)]) == forced
    assert reply.stats.stop_reason == "stop" and reply.text[0].isupper() and reply.text.endswith(".")


def test_a_format_that_refuses_the_forced_end_ends_the_reply_saying_so(open_engine):
    eng = open_engine("Qwen3.5-4B")
    reply, _ = ask(eng, settings(r"[a-z ]{1,60}\n</think>\n\nOk\.", think=True, think_budget=3))
    assert reply.stats.stop_reason == "error"
    assert "thinking budget" in reply.stats.error and "\n" not in reply.stats.error
    assert reply.stats.decode_tokens == 3
