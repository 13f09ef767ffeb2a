"""fit_history on long conversations: a bounded number of renders, the same answer as the scan."""

from __future__ import annotations

import math
import random

import pytest

from app.chat.budget import REPLY_SHARE, Fit, fit_history
from app.engine.errors import ContextOverflowError
from app.engine.message import MessageBody


def scan_fit(system, history, new_message, max_tokens, n_ctx, to_tokens) -> Fit:
    """The algorithm fit_history replaced, kept as the reference: drop one turn, re-render all,
    until the reply has max tokens, or (when even no history leaves that) REPLY_SHARE of the
    context or all the room there is."""
    head = [MessageBody("system", system)] if system and system.strip() else []
    tail = [MessageBody("user", new_message)]
    reserve = max_tokens
    if len(to_tokens(head + history + tail)) + max_tokens > n_ctx:
        reserve = min(max_tokens, REPLY_SHARE * n_ctx // 100, max(n_ctx - len(to_tokens(head + tail)), 1))
    start, full = 0, None
    while True:
        kept = head + history[start:] + tail
        tokens = to_tokens(kept)
        full = full if full is not None else len(tokens)
        if len(tokens) + reserve <= n_ctx:
            budget = min(max_tokens, n_ctx - len(tokens))
            return Fit(tokens, kept, list(range(start)), full - len(tokens), budget)
        if start >= len(history):
            raise ContextOverflowError(f"{len(tokens)} tokens")
        start += 1
        while start < len(history) and history[start].role != "user":
            start += 1


class Counted:
    def __init__(self, to_tokens):
        self.to_tokens, self.calls = to_tokens, 0

    def __call__(self, msgs):
        self.calls += 1
        return self.to_tokens(msgs)


def conversation(n: int, seed: int = 0) -> list[MessageBody]:
    """Turns of uneven length; now and then two user messages in a row or a lone reply,
    as an edited or imported conversation can have."""
    rnd = random.Random(seed)
    out: list[MessageBody] = []
    while len(out) < n:
        out.append(MessageBody("user", f"q{len(out)} " + "tell me more " * rnd.randint(0, 12)))
        if rnd.random() < 0.9:
            out.append(MessageBody("assistant", f"a{len(out)} " + "here is more " * rnd.randint(0, 30)))
        if rnd.random() < 0.05:
            out.append(MessageBody("assistant", "and another thing"))
    return out[:n]


def test_four_thousand_messages_fit_in_a_logarithmic_number_of_renders(engine):
    history = conversation(4000)
    count = Counted(engine.prompt_tokens)
    fit = fit_history("You are terse.", history, "And now?", 64, 2048, count)
    assert fit.dropped and len(fit.tokens) + 64 <= 2048
    assert count.calls <= 3 * math.log2(len(history)) + 5, count.calls
    # The same answer the scan gives, checked at its two ends without running it:
    # the kept messages fit, and keeping one more turn would not.
    cut = len(fit.dropped)
    assert fit.kept == [MessageBody("system", "You are terse."), *history[cut:],
                        MessageBody("user", "And now?")]
    assert fit.tokens == engine.prompt_tokens(fit.kept)
    prev = max(i for i in range(cut) if i == 0 or history[i].role == "user")
    longer = [fit.kept[0], *history[prev:], fit.kept[-1]]
    assert len(engine.prompt_tokens(longer)) + 64 > 2048


CASES = [  # (messages, seed, system, max_tokens, n_ctx)
    (0, 0, None, 64, 512),
    (1, 1, "Be brief.", 64, 512),
    (7, 2, None, 100, 300),
    (40, 3, "Be brief.", 64, 512),
    (40, 4, "", 200, 600),
    (120, 5, "You are a helpful assistant. " * 5, 32, 1024),
    (120, 6, None, 900, 1024),
    (300, 7, "Be brief.", 64, 2048),
]


@pytest.mark.parametrize(("n", "seed", "system", "max_tokens", "n_ctx"), CASES)
def test_same_kept_dropped_and_tokens_as_the_scan(engine, n, seed, system, max_tokens, n_ctx):
    history = conversation(n, seed)
    if seed % 3 == 1 and history:  # a conversation that opens with a reply
        history = [MessageBody("assistant", "Hello, how can I help?"), *history]
    new = "What next? " * (seed + 1)
    ref = scan_fit(system, history, new, max_tokens, n_ctx, engine.prompt_tokens)
    got = fit_history(system, history, new, max_tokens, n_ctx, engine.prompt_tokens)
    assert (got.kept, got.dropped, got.dropped_tokens) == (ref.kept, ref.dropped, ref.dropped_tokens)
    assert got.tokens == ref.tokens


def test_nothing_fits_raises_as_the_scan_does(engine):
    history = conversation(60, 9)
    new = "word " * 700
    with pytest.raises(ContextOverflowError) as ref:
        scan_fit(None, history, new, 64, 512, engine.prompt_tokens)
    count = Counted(engine.prompt_tokens)
    with pytest.raises(ContextOverflowError) as got:
        fit_history(None, history, new, 64, 512, count)
    assert str(ref.value).split(" tokens")[0] in str(got.value) and "\n" not in str(got.value)
    assert count.calls == 2  # the whole history, then none of it


def test_last_render_is_the_kept_prompt():
    """A template format keeps state (its stop strings) from its last render, which the
    caller reads next: that render must be of the messages kept, as with the scan."""
    history = conversation(200, 11)
    seen = []

    def to_tokens(msgs):
        seen.append(list(msgs))
        return list(range(sum(len(m.content) for m in msgs) // 4))

    fit = fit_history(None, history, "ok?", 10, 400, to_tokens)
    assert fit.dropped and seen[-1] == fit.kept
    assert fit == scan_fit(None, history, "ok?", 10, 400, to_tokens)
