"""TurnRecorder and record_turn with a thinking model: the reasoning is saved apart from the answer
while it streams and when the reply is sealed, and a turn that ends while the model is still
thinking keeps what was shown. The engine is a scripted stand-in that emits the events a thinking
model's engine emits (no model here thinks); the store is the real one."""

from __future__ import annotations

import time

import pytest

from app.chat.recorder import TurnRecorder, record_turn
from app.chat.reply import Reply
from app.engine.events import ReasoningDelta, TextDelta
from app.engine.sampling import GenerationSettings
from app.engine.stats import ReplyStats
from app.history.records import COMPLETE, GENERATING, INTERRUPTED
from app.history.store import Store


def stats(stop: str = "stop", error: str | None = None) -> ReplyStats:
    return ReplyStats(ttft_s=0.01, prefill_tokens=5, cached_tokens=0, prefill_s=0.01, prefill_tok_s=500.0,
                      decode_tokens=9, decode_s=0.05, decode_tok_s=180.0, total_s=0.1, kv_used=14, n_ctx=512,
                      stop_reason=stop, error=error, reasoning_tokens=6, reasoning_s=0.04, ttfa_s=0.05)


class Thinker:
    """Streams `thought` as reasoning, waits until the store holds it (the saver's timer wrote it),
    then streams `answer`; `fail` raises after the reasoning instead."""

    def __init__(self, thought: list[str], answer: list[str], fail: bool = False):
        self.thought, self.answer, self.fail = thought, answer, fail
        self.seen_mid_stream: tuple[str, str, str] | None = None

    def identity(self) -> dict:
        return {"file": "thinker.gguf"}

    def reply(self, history, user_text, settings, system, on_event, cancel=None, tools=None) -> Reply:
        n = 0
        for part in self.thought:
            n += 1
            on_event(ReasoningDelta(part, n, time.perf_counter()))
        self.seen_mid_stream = _wait_for_saved("".join(self.thought))
        if self.fail:
            raise RuntimeError("the backend went away")
        for part in self.answer:
            n += 1
            on_event(TextDelta(part, n, time.perf_counter()))
        return Reply("".join(self.answer), stats(), reasoning="".join(self.thought))


def _wait_for_saved(reasoning: str, timeout: float = 10.0) -> tuple[str, str, str]:
    """The newest assistant row as another reader of the file sees it, once its reasoning is saved."""
    deadline = time.monotonic() + timeout
    with Store.open() as other:
        while True:
            conv = other.get_conversation(other.list_conversations()[0].id)
            row = conv.tree[-1]
            if row.reasoning == reasoning or time.monotonic() > deadline:
                return row.content, row.reasoning, row.state
            time.sleep(0.02)


@pytest.fixture
def store():
    s = Store.open()
    yield s
    s.close()


def settings() -> GenerationSettings:
    return GenerationSettings(max_tokens=16, temperature=0.0, seed=1)


def test_the_reasoning_is_saved_while_it_streams_and_sealed_apart_from_the_answer(store):
    engine = Thinker(["91 is odd; ", "7 x 13 = 91."], ["No, ", "91 = 7 x 13."])
    turn = record_turn(TurnRecorder(store), engine, None, "Is 91 prime?", settings(), save_every_s=0.05)
    assert engine.seen_mid_stream == ("", "91 is odd; 7 x 13 = 91.", GENERATING)
    reply = store.get_conversation(turn.conversation_id).messages[-1]
    assert (reply.content, reply.reasoning, reply.state) == \
           ("No, 91 = 7 x 13.", "91 is odd; 7 x 13 = 91.", COMPLETE)
    assert (reply.stats.reasoning_tokens, reply.stats.reasoning_s, reply.stats.ttfa_s) == (6, 0.04, 0.05)


def test_a_failure_while_thinking_keeps_the_reasoning_shown_as_interrupted(store):
    engine = Thinker(["Let me think: ", "first, "], [], fail=True)
    with pytest.raises(RuntimeError, match="the backend went away"):
        record_turn(TurnRecorder(store), engine, None, "Hard question", settings(), save_every_s=0.05)
    conv = store.get_conversation(store.list_conversations()[0].id)
    assert [(m.role, m.content, m.reasoning, m.state) for m in conv.messages] == \
           [("user", "Hard question", "", COMPLETE), ("assistant", "", "Let me think: first, ", INTERRUPTED)]


def test_finish_keeps_a_reply_stopped_while_thinking_and_rolls_back_one_with_nothing(store):
    rec = TurnRecorder(store)
    turn = rec.begin(None, "Stop me", None, settings())
    assert rec.finish(turn, Reply("", stats("cancelled"), reasoning="Halfway through")) == COMPLETE
    kept = store.get_conversation(turn.conversation_id).messages[-1]
    assert (kept.content, kept.reasoning) == ("", "Halfway through")

    empty = rec.begin(None, "Stop me sooner", None, settings())
    assert rec.finish(empty, Reply("", stats("cancelled"))) is None
    assert [c.id for c in store.list_conversations()] == [turn.conversation_id]


def test_a_reply_without_reasoning_keeps_what_streamed_and_abandon_keeps_reasoning(store):
    """An engine that reports no reasoning in its Reply does not erase what the window saved as it
    streamed; a turn left with only reasoning on screen keeps it."""
    rec = TurnRecorder(store)
    turn = rec.begin(None, "Q", None, settings())
    rec.progress(turn, "A", "streamed thought")
    rec.progress(turn, "An")  # a caller that knows nothing of reasoning leaves it
    rec.finish(turn, Reply("Answer", stats()))
    got = store.get_conversation(turn.conversation_id).messages[-1]
    assert (got.content, got.reasoning) == ("Answer", "streamed thought")

    left = rec.begin(turn.conversation_id, "Q2", None, settings())
    assert rec.abandon(left, "", keep_question=True, reasoning="only thinking so far") is True
    got = store.get_conversation(turn.conversation_id).messages[-1]
    assert (got.content, got.reasoning, got.state) == ("", "only thinking so far", INTERRUPTED)
