"""A thinking model's reply from a real llama-server (tests/remote/thinking_servers.py): the thinking
arrives as `reasoning_content`, is kept apart from the answer, and times the reply (TTFT at the
first thought, TTFA at the first answer word); the thinking switch reaches the template."""

from __future__ import annotations

import re

import httpx
import pytest

from app.chat.remote_engine import RemoteChatEngine
from app.engine.events import FirstToken, ReasoningDelta, TextDelta
from app.engine.grammar import Constraint
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.server import LLAMA_SERVER
from app.remote.stream import chat_body
from tests.remote.thinking_servers import (
    ANSWER_GRAMMAR,
    QWEN3,
    THINKING_GRAMMAR,
    start_thinking_server,
    thinking,
)

THOUGHT = re.compile(r"First, [a-z]{3,8} [a-z]{3,8} [a-z]{3,8}\.")
ANSWER = re.compile(r"The answer is [a-z]{3,8}\.")
QUESTION = "What colour is the sky?"


def _held(grammar: str, max_tokens: int = 64) -> GenerationSettings:
    return GenerationSettings(max_tokens=max_tokens, temperature=0, seed=7,
                              constraint=Constraint("gbnf", grammar))


@pytest.fixture(scope="module")
def qwen3(model_path):
    srv = start_thinking_server(model_path, QWEN3)
    yield srv
    srv.stop()


def _engine(srv) -> RemoteChatEngine:
    return RemoteChatEngine(Endpoint.parse(srv.base + "/v1"))


@pytest.fixture(scope="module")
def thought(qwen3):
    """One reply held to the thinking shape, and its events (two shared cores: asked once)."""
    events: list = []
    eng = _engine(qwen3)
    try:
        return eng.reply([], QUESTION, _held(THINKING_GRAMMAR), on_event=events.append), events
    finally:
        eng.close()


def test_reasoning_content_streams_apart_from_the_answer_and_times_the_reply(thought, qwen3):
    r, events = thought
    s = r.stats
    assert s.error is None and s.stop_reason == "stop", (s.error, qwen3.tail())
    assert THOUGHT.fullmatch(r.reasoning.strip()), r.reasoning
    assert ANSWER.fullmatch(r.text.strip()), r.text
    assert "think>" not in r.text + r.reasoning  # the tags are the server's to strip
    thoughts = [e for e in events if isinstance(e, ReasoningDelta)]
    answers = [e for e in events if isinstance(e, TextDelta)]
    assert len(thoughts) >= 3 and len(answers) >= 2  # streamed token by token, not handed over at the end
    assert thoughts[-1].t <= answers[0].t
    assert [e.generated for e in thoughts + answers] == list(range(1, len(thoughts) + len(answers) + 1))
    first = next(e for e in events if isinstance(e, FirstToken))
    assert first.ttft_s == pytest.approx(s.ttft_s)
    assert s.ttft_s < s.ttfa_s < s.total_s
    assert 0 < s.reasoning_s < s.ttfa_s
    assert s.reasoning_tokens is None  # llama-server sends no count of them: never guessed
    # Every token the server counted was written between the first thought and the finish: the
    # rate over that span, not over the answer's (which would count the thinking's tokens in a
    # fraction of the time).
    assert s.decode_tokens >= len(thoughts) + len(answers)
    answer_span = answers[-1].t - answers[0].t
    assert s.wall_decode_tok_s < (s.decode_tokens - 1) / answer_span
    assert s.wall_decode_tok_s > (s.decode_tokens - 1) / (s.total_s - s.ttft_s + 0.5)
    print(f"\nllama-server thinking reply: TTFT {s.ttft_s * 1000:.0f} ms, TTFA {s.ttfa_s * 1000:.0f} ms, "
          f"thinking {s.reasoning_s * 1000:.0f} ms, {s.decode_tokens} tokens at "
          f"{s.wall_decode_tok_s:.1f} tok/s received (server {s.decode_tok_s:.1f})")


def test_the_thinking_and_answer_kept_apart_add_up_to_what_the_model_wrote(thought, qwen3):
    """The same greedy reply asked raw (reasoning_format none: the model's text as written, tags
    and all) is the thinking and the answer put back together, and counts the same tokens."""
    r = thought[0]
    body = chat_body(LLAMA_SERVER, "m", [{"role": "user", "content": QUESTION}], _held(THINKING_GRAMMAR))
    body.update(stream=False, reasoning_format="none")  # the same sampling, the text as written
    raw = httpx.post(qwen3.base + "/v1/chat/completions", json=body, timeout=600).json()
    written = raw["choices"][0]["message"]["content"]
    put_back = (r"<think>\s*" + re.escape(r.reasoning.strip()) + r"\s*</think>\s*" + re.escape(r.text.strip())
                + r"\s*")
    assert re.fullmatch(put_back, written), (written, r.reasoning, r.text)
    assert raw["usage"]["completion_tokens"] == r.stats.decode_tokens


def test_thinking_off_reaches_the_template_and_no_thinking_comes_back(thought, qwen3):
    """`enable_thinking: false` makes Qwen3's template close the thinking in the prompt itself:
    more prompt tokens than the same question asked as Qwen3 thinks by default, and no thinking."""
    on = thought[0]
    eng = _engine(qwen3)
    try:
        off = eng.reply([], QUESTION, thinking(_held(ANSWER_GRAMMAR, 16), False))
    finally:
        eng.close()
    assert on.reasoning and on.stats.ttfa_s is not None
    assert off.stats.error is None and ANSWER.fullmatch(off.text.strip())
    assert off.reasoning == "" and off.stats.ttfa_s is None and off.stats.reasoning_s is None
    assert off.stats.prompt_tokens > on.stats.prompt_tokens
