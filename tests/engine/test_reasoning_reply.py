"""ReasoningReply between a decoder and its listener, on a scripted token stream: markers that
are control tokens (gpt-oss's <|end|>, Gemma 4's channel tokens) never reach the decoder's text,
and are put back where the sampler drew them before the split."""

from __future__ import annotations

from pathlib import Path

from app.engine.events import Finished, FirstToken, Progress, ReasoningDelta, TextDelta
from app.engine.reasoning import BUDGET_MESSAGE, ReasoningReply
from app.engine.reasoning_formats import TemplateThinking
from app.engine.stats import ReplyStats

TEMPLATES = Path(__file__).parent.parent / "data" / "templates"


class Vocab:
    """Words are tokens; the names in `control` are control tokens the decoder's text leaves out."""

    def __init__(self, control: tuple[str, ...]):
        self.control = control
        self.ids: dict[str, int] = {}

    def id(self, text: str) -> int:
        return self.ids.setdefault(text, len(self.ids) + 1)

    def text(self, tok: int) -> str:
        return next(t for t, i in self.ids.items() if i == tok)

    def tokenize(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            name = next((c for c in self.control if text.startswith(c, i)), text[i])
            out.append(self.id(name))
            i += len(name)
        return out

    def piece(self, tok: int) -> bytes:
        return self.text(tok).encode()

    def plain(self, tok: int) -> bytes:
        return b"" if self.text(tok) in self.control else self.piece(tok)


def run(template: str, control: tuple[str, ...], tokens: list[str], think=None, budget=None):
    """Drive a ReasoningReply as the decoder does: the sampler's hook sees each token (and forces
    when told), the reader's text (control tokens left out) goes out as TextDelta."""
    v = Vocab(control)
    thinking = TemplateThinking.read((TEMPLATES / f"{template}.jinja").read_text())
    rr = ReasoningReply(thinking, think, budget, False, v.tokenize, v.piece, v.plain)
    events: list = []
    sink = rr.sink(events.append)
    drawn, t = [], 100.0
    script = iter(tokens)
    while len(drawn) < 200:
        if rr.tracker.forcing:
            tok = rr.tracker.forced()
        else:
            word = next(script, None)
            if word is None:
                break
            tok = v.id(word)
        rr.tracker.accept(tok)
        drawn.append(tok)
        t += 0.1
        text = v.plain(tok).decode()
        if text:
            if not any(isinstance(e, FirstToken) for e in events) and rr._ttft is None:
                sink(FirstToken(t - 99.0))
            sink(TextDelta(text, len(drawn), t))
        sink(Progress("decode", t, 0, len(drawn), None, 0, 0))
    stats = ReplyStats(None, 0, 0, 0.0, None, len(drawn), 0.0, None, t, 0, 0, "stop")
    sink(Finished("(the decoder's text)", stats, tuple(drawn)))
    return rr, events, stats, [v.text(x) for x in drawn]


def streamed(events, kind) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


HARMONY = ("<|channel|>", "<|message|>", "<|end|>", "<|start|>")


def test_harmony_with_an_invisible_end_marker():
    words = ["<|channel|>", "analysis", "<|message|>", "I'm", "\n", "thinking", "<|end|>", "<|start|>",
             "assistant", "<|channel|>", "final", "<|message|>", "Hello", ",", " world"]
    rr, events, stats, _ = run("openai-gpt-oss-120b", ("<|end|>",), words)
    assert (rr.reasoning, rr.answer) == ("I'm\nthinking", "Hello, world")
    assert streamed(events, ReasoningDelta) == rr.reasoning and streamed(events, TextDelta) == rr.answer
    assert isinstance(events[-1], Finished) and events[-1].text == "Hello, world"
    assert sum(isinstance(e, Progress) for e in events) == len(words)  # other events pass through
    assert stats.reasoning_tokens == 7  # through <|end|>, though it showed no text
    assert [type(e).__name__ for e in events if isinstance(e, FirstToken)] == ["FirstToken"]
    # Submitted at 99.0; the first shown text is the reasoning's "I'm" (token 4 at 100.4), not
    # the channel header the decoder showed first; the answer's is "Hello" (token 13 at 101.3).
    assert abs(stats.ttft_s - 1.4) < 1e-6 and abs(stats.ttfa_s - 2.3) < 1e-6
    # To the end marker, put back with the next text shown (token 8 at 100.8).
    assert abs(stats.reasoning_s - 0.4) < 1e-6


def test_gemma4_channel_tokens_invisible():
    words = ["<|channel>", "thought", "\n", "plan", "<channel|>", "Paris", "."]
    rr, _, stats, _ = run("google-gemma-4-31B-it", ("<|channel>", "<channel|>"), words, think=True)
    assert (rr.reasoning, rr.answer) == ("plan", "Paris.")
    assert stats.reasoning_tokens == 5


def test_ministral_think_tokens_invisible():
    words = ["[THINK]", "hmm", "[/THINK]", "Yes", "."]
    rr, _, stats, _ = run("mistralai-Ministral-3-14B-Reasoning-2512", ("[THINK]", "[/THINK]"), words)
    assert (rr.reasoning, rr.answer) == ("hmm", "Yes.")
    assert stats.reasoning_tokens == 3


def test_the_budget_forces_an_invisible_end_marker():
    words = ["<|channel|>", "analysis", "<|message|>", "a", " b", " c", " d", " e",
             "<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "Ok"]
    rr, _, stats, drawn = run("openai-gpt-oss-120b", ("<|end|>",), words, budget=2)
    forced = [*BUDGET_MESSAGE, "<|end|>"]
    assert drawn[5:5 + len(forced)] == forced  # after "a", " b": the message, then <|end|>
    assert rr.reasoning == "a b" + BUDGET_MESSAGE.rstrip()
    assert stats.reasoning_tokens == 5 + len(forced)
    # The model's own next words: " c" ... and the final channel's header, then the answer.
    assert rr.answer == "Ok"


def test_a_plain_answer_from_a_thinking_template_has_no_reasoning_figures():
    rr, events, stats, _ = run("Qwen-Qwen3-0.6B", (), ["Just", " this", "."])
    assert (rr.reasoning, rr.answer) == ("", "Just this.")
    assert stats.reasoning_tokens is None and stats.reasoning_s is None
    assert stats.ttfa_s == stats.ttft_s
    assert not any(isinstance(e, ReasoningDelta) for e in events)
