"""vLLM's and OpenRouter's names for the thinking (`reasoning`, `reasoning_details`), over a real
socket from a stand-in that sends their wire form (tests/remote/vllm_standin.py: there is no vLLM
here), and the fields a vLLM server is sent for the thinking settings."""

from __future__ import annotations

import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.engine.events import FirstToken, ReasoningDelta, TextDelta
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.reasoning import thinking_fields, unsent
from tests.remote.thinking_servers import thinking
from tests.remote.vllm_standin import ANSWER, PROMPT_TOKENS, THOUGHT, StandIn

SHORT = GenerationSettings(max_tokens=32, temperature=0)


@pytest.fixture(scope="module")
def standin():
    srv = StandIn()
    yield srv
    srv.stop()


@pytest.fixture
def engine(standin):
    standin.mode, standin.reasoning_tokens = "vllm", len(THOUGHT)
    said: list[str] = []
    eng = RemoteChatEngine(Endpoint.parse(standin.base), notice=said.append)
    eng.said = said
    yield eng
    eng.close()


def test_vllm_reasoning_field_streams_as_thinking_apart_from_the_answer_with_its_own_times(engine):
    events = []
    r = engine.reply([], "Name a colour.", SHORT, on_event=events.append)
    assert engine.info.kind == "vLLM"
    assert r.reasoning == "".join(THOUGHT) and r.text == "".join(ANSWER)
    thoughts = [e for e in events if isinstance(e, ReasoningDelta)]
    answers = [e for e in events if isinstance(e, TextDelta)]
    assert [e.text for e in thoughts] == THOUGHT and [e.text for e in answers] == ANSWER
    assert thoughts[-1].t < answers[0].t  # in the order they came
    assert sum(isinstance(e, FirstToken) for e in events) == 1
    s = r.stats
    assert s.error is None and s.stop_reason == "stop"
    assert s.ttft_s < s.ttfa_s < s.total_s  # TTFT at the first thought, TTFA at the first answer word
    assert s.ttfa_s - s.ttft_s >= 0.03 * (len(THOUGHT) - 1) * 0.5  # the thinking's ~0.3 s between them
    assert s.reasoning_tokens == len(THOUGHT) and s.decode_tokens == len(THOUGHT) + len(ANSWER)
    assert s.prompt_tokens == PROMPT_TOKENS
    assert 0 < s.reasoning_s < s.ttfa_s
    # The rate divides every completion token by the span they were written in, from the first
    # thought on: over the answer's span alone the same count would read several times faster.
    answer_span = answers[-1].t - answers[0].t
    assert s.wall_decode_tok_s < (s.decode_tokens - 1) / answer_span / 3
    assert s.wall_decode_tok_s > (s.decode_tokens - 1) / s.total_s


def test_openrouter_reasoning_beside_reasoning_details_is_read_once(engine, standin):
    standin.mode = "openrouter"
    r = engine.reply([], "Name a colour.", SHORT)
    assert r.reasoning == "".join(THOUGHT)  # not each word twice
    assert r.text == "".join(ANSWER) and r.stats.error is None


def test_a_whole_json_reply_to_a_streamed_request_keeps_its_reasoning(engine, standin):
    """A proxy that buffers answers a streamed request with one chat.completion: its message's
    `reasoning` is read as the stream's would be (it used to end as a malformed stream)."""
    standin.mode = "whole"
    events = []
    r = engine.reply([], "Name a colour.", SHORT, on_event=events.append)
    assert r.stats.error is None, r.stats.error
    assert r.reasoning == "".join(THOUGHT) and r.text == "".join(ANSWER)
    assert [type(e).__name__ for e in events if isinstance(e, (ReasoningDelta, TextDelta))] == \
        ["ReasoningDelta", "TextDelta"]
    assert r.stats.reasoning_tokens == len(THOUGHT) and r.stats.ttft_s <= r.stats.ttfa_s


def test_thinking_that_is_not_text_ends_the_reply_as_malformed_in_one_line(engine, standin):
    standin.mode = "bad"
    r = engine.reply([], "Name a colour.", SHORT)
    assert r.stats.stop_reason == "error" and "'reasoning' is not text" in r.stats.error
    assert r.reasoning == "" and r.text == ""


def test_no_reasoning_count_from_the_server_is_none_never_a_guess(engine, standin):
    standin.reasoning_tokens = None
    r = engine.reply([], "Name a colour.", SHORT)
    assert r.reasoning and r.stats.reasoning_tokens is None and r.stats.ttfa_s is not None


def test_a_reasoning_count_past_the_completion_is_dropped_and_said(engine, standin):
    standin.reasoning_tokens = 10**6
    r = engine.reply([], "Name a colour.", SHORT)
    assert r.stats.reasoning_tokens is None
    assert any("reasoning_tokens = 1000000" in line for line in engine.said)


@pytest.mark.parametrize("think, budget, sent", [
    (None, None, {}),
    (True, 64, {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 64}),
    (False, 64, {"chat_template_kwargs": {"enable_thinking": False}}),
    ("high", None, {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high"}),
])
def test_vllm_is_sent_its_own_thinking_fields(engine, standin, think, budget, sent):
    engine.reply([], "Name a colour.", thinking(SHORT, think, budget))
    body = standin.bodies[-1]
    keys = ("chat_template_kwargs", "reasoning_effort", "thinking_token_budget", "reasoning_budget_tokens",
            "reasoning_format")
    assert {k: body[k] for k in keys if k in body} == sent
    assert not engine.said  # vLLM takes all of it: nothing to say


def test_a_budget_a_server_cannot_take_is_said_once(engine, standin, monkeypatch):
    """An OpenAI-compatible server of no known kind takes reasoning_effort, and no budget."""
    monkeypatch.setattr(engine.info, "kind", "OpenAI-compatible")
    settings = thinking(SHORT, "low", 32)
    engine.reply([], "Name a colour.", settings)
    engine.reply([], "Name a colour.", settings)
    body = standin.bodies[-1]
    assert body.get("reasoning_effort") == "low" and "thinking_token_budget" not in body
    assert len([s for s in engine.said if "budget" in s]) == 1


LLAMA_ON = {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_format": "deepseek"}


@pytest.mark.parametrize("kind, think, budget, sent, said", [
    ("llama-server", True, 256, {**LLAMA_ON, "reasoning_budget_tokens": 256}, 0),
    ("llama-server", "medium", None, {**LLAMA_ON, "reasoning_effort": "medium"}, 0),
    ("llama-server", None, None, {}, 0),
    ("Ollama", False, None, {"reasoning_effort": "none"}, 0),
    ("Ollama", "low", 10, {"reasoning_effort": "low"}, 1),  # no budget field
    ("llamadesk serve", True, 10, {**LLAMA_ON, "reasoning_budget_tokens": 10}, 0),  # llama-server's words
    ("OpenAI-compatible", True, 10, {}, 2),  # reasoning_effort alone, and no level was asked: both said
])
def test_each_server_kind_is_sent_the_thinking_fields_it_takes(kind, think, budget, sent, said):
    s = thinking(SHORT, think, budget)
    assert thinking_fields(kind, s) == sent
    assert len(unsent(kind, s)) == said
