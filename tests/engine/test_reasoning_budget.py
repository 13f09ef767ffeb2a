"""The thinking budget's state machine: llama.cpp's tests/test-reasoning-budget.cpp, ported.

llama.cpp matches token sequences; this budget matches the tokens' bytes, so each test token
stands for a piece of text: 100 opens, 101 closes, 103 + 104 close together, 110 + 111 open
together, 102 is the budget message, anything else is a word.
"""

from __future__ import annotations

import pytest

from app.engine.reasoning_budget import (
    COUNTING,
    DONE,
    FORCING,
    IDLE,
    WAITING_UTF8,
    ReasoningBudget,
    utf8_complete,
)

PIECES = {100: b"<S>", 101: b"<E>", 102: b"<M>", 103: b"<e1", 104: b"e2>", 110: b"<s1", 111: b"s2>",
          200: "é".encode()[:1], 201: "é".encode()[1:]}
S, E, E2, S2 = b"<S>", b"<E>", b"<e1e2>", b"<s1s2>"


def piece(tok: int) -> bytes:
    return PIECES.get(tok, b"w")


def budget(start=(S,), end=(E,), forced=(102, 101), n=5, state=IDLE) -> ReasoningBudget:
    return ReasoningBudget(piece, start, end, forced, n, state)


def forcing_span(b: ReasoningBudget, sequence) -> tuple[int | None, int | None]:
    """Where the budget forced, as llama.cpp's harness finds it: apply, then accept each token."""
    first = last = None
    for i, tok in enumerate(sequence):
        forcing = b.forcing
        if forcing:
            assert b.forced() in (102, 101)
        b.accept(tok)
        if forcing:
            first = i if first is None else first
            last = i
        elif first is not None:
            break
    return first, last


@pytest.mark.parametrize(("what", "seq", "start", "end", "n", "state", "span"), [
    ("natural end before budget exhausted", [100, 50, 51, 101, 52], (S,), (E,), 5, IDLE, (None, None)),
    ("budget exhausted forcing", [100, 50, 51, 52, 53], (S,), (E,), 2, IDLE, (3, 4)),
    ("activate immediately budget=0", [100, 50, 51, 52], (S,), (E,), 0, COUNTING, (0, 1)),
    ("no start/end configured", [50, 51, 52, 53], (), (), 2, IDLE, (None, None)),
    ("activate immediately with budget", [50, 51, 52, 53], (S,), (E,), 2, COUNTING, (2, 3)),
    ("multi-block re-arms budget after DONE", [100, 50, 101, 100, 60, 61, 62, 63], (S,), (E,), 2, IDLE,
     (6, 7)),
    ("multiple start sequences", [110, 111, 50, 51, 52, 53], (S, S2), (E,), 2, IDLE, (4, 5)),
    ("multiple end sequences", [100, 50, 103, 104, 52], (S,), (E, E2), 5, IDLE, (None, None)),
])
def test_llama_cpp_cases(what, seq, start, end, n, state, span):
    assert forcing_span(budget(start, end, n=n, state=state), seq) == span, what


def test_forcing_hands_out_the_message_then_the_end_and_is_done():
    b = budget(n=1)
    b.accept(100)
    b.accept(50)
    assert b.state == FORCING and b.forced() == 102 and b.forced_at == 2
    b.accept(102)
    assert b.forced() == 101
    b.accept(101)
    assert b.state == DONE and not b.forcing and b.end_match == E


def test_manual_force_only_while_counting():
    b = budget()
    assert not b.force() and b.state == IDLE
    b.accept(100)
    b.accept(50)
    assert b.force() and b.state == FORCING and b.forced() == 102
    b.accept(102)
    assert not b.force() and b.forced() == 101  # does not rewind the force position
    b.accept(101)
    assert b.state == DONE and not b.force()


def test_end_match_records_the_longest_end_and_rearming_clears_it():
    b = budget(end=(E, E2))
    for t in (100, 50, 103, 104):
        b.accept(t)
    assert b.state == DONE and b.end_match == E2
    b.accept(100)
    assert b.state == COUNTING and b.end_match is None
    b = budget(end=(b"e2>", E2), forced=(102, 103, 104), n=0, state=FORCING)
    for t in (102, 103, 104):
        b.accept(t)
    assert b.end_match == E2  # forcing records the end within the forced tokens
    b = budget(forced=(102,), n=0, state=FORCING)
    b.accept(102)
    assert b.state == DONE and b.end_match is None


def test_a_spent_budget_waits_for_a_split_character():
    b = budget(n=2)
    for t in (100, 50, 200):  # the budget ends on the first byte of "é"
        b.accept(t)
    assert b.state == WAITING_UTF8 and not b.forcing
    b.accept(201)
    assert b.state == FORCING and b.forced() == 102


def test_an_end_spelled_in_other_tokens_still_ends_it():
    pieces = {1: b"<", 2: b"/think", 3: b">", 4: b"</think>"}
    b = ReasoningBudget(lambda t: pieces.get(t, b"w"), [b"<think>"], [b"</think>"], [4], 10, COUNTING)
    for t in (9, 1, 2, 3):
        b.accept(t)
    assert b.state == DONE


@pytest.mark.parametrize(("data", "complete"), [
    (b"hello", True), (b"", True), (b"\xc2\xa0", True), (b"\xe2\x80\x9c", True),
    (b"\xf0\x9f\x98\x80", True), (b"abc\xc3\xa9", True),
    (b"\xc2", False), (b"\xe2\x80", False), (b"\xe2", False), (b"\xf0\x9f\x98", False),
    (b"\xf0\x9f", False), (b"\xf0", False), (b"\x80", False), (b"hello\xc3", False),
    (b"hello\xc3\xa9", True),
])
def test_utf8_boundary_detection(data, complete):
    assert utf8_complete(data) is complete
