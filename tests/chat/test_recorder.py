"""record_turn with the real model: what `ask` saves for each turn (the window records through
the same TurnRecorder; tests/ui/test_chat_window.py checks it there)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from app.chat.recorder import ReplySaver, Turn, TurnRecorder, record_turn
from app.engine.control import CancelToken
from app.engine.errors import ContextOverflowError, GenerationError
from app.engine.events import TextDelta
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.history.records import COMPLETE, GENERATING, INTERRUPTED
from app.history.store import Store
from tests.faults import failing_decode_after


def greedy(n: int) -> GenerationSettings:
    return GenerationSettings(max_tokens=n, temperature=0.0, seed=1)


@pytest.fixture
def store():
    s = Store.open()
    yield s
    s.close()


@pytest.fixture
def rec(store):
    return TurnRecorder(store)


def test_new_turn_is_saved_with_its_stats(store, rec, engine):
    turn = record_turn(rec, engine, None, "What is the capital of France?", greedy(12),
                       system="Answer briefly.")
    conv = store.get_conversation(turn.conversation_id)
    file = engine.model.header.path.name
    assert (conv.title, conv.system_prompt, conv.model) == \
           ("What is the capital of France?", "Answer briefly.", file)
    assert conv.settings["max_tokens"] == 12 and conv.settings["temperature"] == 0.0
    assert conv.settings["model"] == engine.identity()
    assert conv.settings["model"]["quantization"] == "Q4_K_M" and conv.settings["model"]["size"] > 0
    user, reply = conv.messages
    assert (user.id, user.role, user.content) == \
           (turn.user_message_id, "user", "What is the capital of France?")
    assert (reply.id, reply.content, reply.state) == (turn.reply_message_id, turn.reply.text, COMPLETE)
    assert reply.stats == turn.reply.stats and reply.stats.decode_tokens > 0


def test_continued_turn_sends_the_history(store, rec, engine):
    first = record_turn(rec, engine, None, "My name is Ada.", greedy(6), system="Be kind.")
    second = record_turn(rec, engine, first.conversation_id, "What is my name?", greedy(6))
    conv = store.get_conversation(first.conversation_id)
    assert [m.content for m in conv.messages] == \
           ["My name is Ada.", first.reply.text, "What is my name?", second.reply.text]
    assert conv.system_prompt == "Be kind."  # kept when the next turn gives none
    # Exactly the prompt the window builds from the stored history:
    msgs, _ = conv.history()
    expected = engine.prompt_tokens([MessageBody("system", "Be kind."), *msgs[:3]])
    assert second.reply.stats.prompt_tokens == len(expected)


def test_turns_left_out_by_the_context_budget_are_marked(store, rec, engine):
    cid = store.create_conversation()
    long = "The quick brown fox jumps over the lazy dog. " * 30  # ~300 tokens a turn
    ids = []
    for i in range(4):
        ids.append(store.add_message(cid, "user", f"{i}: {long}"))
        ids.append(store.add_message(cid, "assistant", f"ok {i}"))
    # A reply budget past half the 2048: turns go until the reply has half the context,
    # so 4 turns of ~300 cannot all stay. It is decided before decoding, so one token of
    # the reply is enough.
    cancel = CancelToken()
    turn = record_turn(rec, engine, cid, "Summarise.", greedy(1950), cancel=cancel,
                       on_event=lambda ev: isinstance(ev, TextDelta) and cancel.cancel())
    assert turn.reply.dropped, "~1,000 tokens of prompt cannot hold 4 turns of ~300"
    marked = [m.id for m in store.get_conversation(cid).messages if m.out_of_context]
    assert marked == [ids[i] for i in turn.reply.dropped] == ids[: len(marked)]
    assert turn.reply.stats.dropped_messages == len(marked)


def test_overflow_before_any_text_rolls_the_turn_back(store, rec, engine):
    huge = "word " * 3000
    with pytest.raises(ContextOverflowError):
        record_turn(rec, engine, None, huge, greedy(8))
    assert store.list_conversations() == []
    first = record_turn(rec, engine, None, "Hello", greedy(4))
    with pytest.raises(ContextOverflowError):
        record_turn(rec, engine, first.conversation_id, huge, greedy(8))
    assert [m.content for m in store.get_conversation(first.conversation_id).messages] == \
           ["Hello", first.reply.text]


def test_failure_after_some_text_keeps_it_interrupted(store, rec, engine):
    class Boom(Exception):
        pass

    def on_event(ev):
        if isinstance(ev, TextDelta):
            raise Boom

    with pytest.raises(Boom):
        record_turn(rec, engine, None, "Tell me a story.", greedy(50), on_event=on_event)
    (conv,) = store.list_conversations()
    question, reply = store.get_conversation(conv.id).messages
    assert question.content == "Tell me a story."
    assert reply.state == INTERRUPTED and reply.content != ""


def test_engine_error_after_streamed_text_keeps_question_and_partial_reply(store, rec, engine,
                                                                          monkeypatch):
    shown = []
    failing_decode_after(monkeypatch, 6)
    turn = record_turn(rec, engine, None, "Tell me a story.", greedy(40),
                       on_event=lambda ev: isinstance(ev, TextDelta) and shown.append(ev.text))
    assert turn.reply.stats.stop_reason == "error" and "llama_decode failed" in turn.reply.stats.error
    question, reply = store.get_conversation(turn.conversation_id).messages
    assert question.content == "Tell me a story."
    assert shown and reply.content == "".join(shown) == turn.reply.text
    assert reply.state == INTERRUPTED and reply.stats.error == turn.reply.stats.error


def test_engine_error_before_any_text_rolls_the_turn_back(store, rec, engine, monkeypatch):
    engine.decoder.reset()  # a prompt with no cached prefix: the failure hits the prefill
    failing_decode_after(monkeypatch, 0)
    with pytest.raises(GenerationError, match="during prefill"):
        record_turn(rec, engine, None, "Tell me a story.", greedy(40))
    assert store.list_conversations() == []


def test_reply_is_visible_to_other_processes_while_it_grows(store, rec, engine):
    seen, parts = [], []
    conn = sqlite3.connect(store.path)

    def on_event(ev):  # a second reader, as another process would read
        if isinstance(ev, TextDelta):
            parts.append(ev.text)
            time.sleep(0.03)  # let the saver's timer tick between tokens, however fast they come
            seen.append((conn.execute("SELECT content, state FROM messages WHERE role = 'assistant'")
                         .fetchone(), "".join(parts)))

    try:
        turn = record_turn(rec, engine, None, "Count to twenty:", greedy(16), on_event=on_event,
                           save_every_s=0.01)
    finally:
        conn.close()
    assert len(seen) > 2
    assert all(state == GENERATING and so_far.startswith(content) for (content, state), so_far in seen)
    assert any(content for (content, _), _ in seen[1:]), "the partial reply was never readable"
    assert store.get_conversation(turn.conversation_id).messages[-1].content == turn.reply.text


def test_saver_saves_on_its_own_timer_without_events(store):
    cid = store.create_conversation()
    mid = store.begin_reply(cid)
    turn = Turn(cid, 0, mid, [], created=False)
    saver = ReplySaver(TurnRecorder(store), turn, every_s=0.05)
    with saver:
        saver(TextDelta("first words", 1, 0.0))
        deadline = time.monotonic() + 5
        while store.get_conversation(cid).messages[-1].content != "first words":  # no further event
            assert time.monotonic() < deadline, "the text waited for an event that never came"
            time.sleep(0.01)
        stamp = store.get_conversation(cid).messages[-1].updated_at
        time.sleep(0.3)
        assert store.get_conversation(cid).messages[-1].updated_at > stamp  # heartbeat while idle
    n = saver.saves
    time.sleep(0.15)
    assert saver.saves == n  # stopped with the generation
    assert not saver._thread.is_alive()
    with pytest.raises(ValueError):
        ReplySaver(TurnRecorder(store), turn, every_s=0)


def test_a_question_that_cannot_be_stored_leaves_no_orphan_conversation(store):
    """`ask $'hi \\xff'` gives Python a lone surrogate: the whole first write is refused."""
    from app.history.errors import StoreError

    bad = "hi \udcff"
    with pytest.raises(StoreError, match="the message is not valid UTF-8 text") as exc:
        TurnRecorder(store).begin(None, bad, "sys", greedy(4))
    assert "\n" not in str(exc.value)
    assert store.list_conversations() == []

    kept = store.create_conversation(system_prompt="old")
    store.add_message(kept, "user", "earlier")
    reports = []
    rec = TurnRecorder(store, on_error=reports.append)  # the window: reported once, chat goes on
    assert rec.begin(kept, bad, "new system", greedy(4)) is None
    assert rec.begin(None, bad, None, greedy(4)) is None
    assert len(reports) == 1 and "not valid UTF-8" in reports[0] and "\n" not in reports[0]
    conv = store.get_conversation(kept)
    assert [m.content for m in conv.messages] == ["earlier"] and conv.system_prompt == "old"
    assert [c.id for c in store.list_conversations()] == [kept]


def test_begin_saves_the_question_and_an_empty_reply_in_one_go(store):
    rec = TurnRecorder(store)
    rec.model = {"file": "m.gguf", "quantization": "Q4_K_M"}
    turn = rec.begin(None, "A question", "sys", greedy(4), history_ids=[])
    conv = store.get_conversation(turn.conversation_id)
    assert turn.created and (conv.title, conv.system_prompt, conv.model) == ("A question", "sys", "m.gguf")
    assert conv.settings["model"] == rec.model and conv.settings["max_tokens"] == 4
    assert [(m.id, m.role, m.state) for m in conv.messages] == \
           [(turn.user_message_id, "user", COMPLETE), (turn.reply_message_id, "assistant", GENERATING)]
    rec.abandon(turn, "")  # nothing shown: the new conversation goes with it
    assert store.list_conversations() == []


def test_a_turn_stopped_before_any_text_leaves_nothing_behind(store, rec, engine):
    first = record_turn(rec, engine, None, "Hello", greedy(4))
    cancel = CancelToken()
    cancel.cancel()  # Ctrl+C during the prefill: no token was ever shown
    turn = record_turn(rec, engine, first.conversation_id, "Tell me a story.", greedy(40), cancel=cancel)
    assert turn.reply.stats.stop_reason == "cancelled" and turn.reply.text == "" and turn.state is None
    assert [m.content for m in store.get_conversation(first.conversation_id).messages] == \
           ["Hello", first.reply.text]
    alone = record_turn(rec, engine, None, "Tell me a story.", greedy(40), cancel=cancel)
    assert alone.state is None and [c.id for c in store.list_conversations()] == [first.conversation_id]
