"""Events a reply emits while it is produced, on the thread that drives its context.

Plain dataclasses, so the Qt bridge, the CLI printer and the tests consume
the same stream; the bridge turns them into queued signals.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.stats import ReplyStats


@dataclass(frozen=True)
class PrefillStarted:
    prompt_tokens: int
    cached_tokens: int
    new_tokens: int
    n_ctx: int
    cached_disk_tokens: int = 0  # of cached_tokens, loaded from the prompt cache on disk
    # The most tokens the reply may have: max tokens, or fewer when the context has no room for
    # them beside the prompt (0: not said).
    reply_budget: int = 0


@dataclass(frozen=True)
class Preparing:
    """Before the prompt is read, work that the wait is spent on and that is not this reply's
    own: the first constrained reply on a model indexes its vocabulary (once per model)."""

    what: str  # in words, for the waiting line: "indexing the model's vocabulary for the format"


@dataclass(frozen=True)
class SpecProgress:
    """Speculative decoding as it runs: what the gauges show beside the decode rate."""

    mode: str  # "ngram" or "draft"
    drafted: int  # guesses checked so far
    accepted: int  # of those, kept
    checks: int
    speedup: float | None  # this reply's decode rate over plain steps' (None: not measured yet)
    plain_tok_s: float | None  # the rate without it, from the measured cost of a plain step
    stepped_aside: str | None = None  # why it is off for the rest of the reply


@dataclass(frozen=True)
class Progress:
    """Live gauges: every 0.2 s while work runs, or at the next token when one step takes longer;
    in the prefill also once before the first chunk and after each one."""

    phase: str  # "prefill" or "decode"
    elapsed_s: float  # since the request was submitted
    prefill_done: int  # prompt tokens evaluated so far (whole chunks), of PrefillStarted.new_tokens
    generated: int
    rate_tok_s: float | None  # rolling decode rate (decode) / running prefill rate
    kv_used: int
    n_ctx: int
    spec: SpecProgress | None = None  # while the decode speculates
    # Keeping to the reply's constraint so far, per generated token (None: free text): the gauges
    # show it live, as it is part of every decode step.
    grammar_ms: float | None = None


@dataclass(frozen=True)
class FirstToken:
    ttft_s: float


@dataclass(frozen=True)
class TextDelta:
    text: str
    generated: int  # tokens generated so far
    t: float  # perf_counter() when the text became visible
    # The log-probabilities of the tokens since the last delta, when the request asked for them
    # (app.engine.logprobs.TokenLogprob; a delta's text and its tokens need not align one to one).
    logprobs: tuple = ()


@dataclass(frozen=True)
class ReasoningDelta:
    """Thinking text as it becomes visible: a thinking model's reasoning, split from the answer
    (app.engine.reasoning) or read from a server's `reasoning_content` / `reasoning` field. The
    first one is the reply's first token (TTFT); the answer's first TextDelta after it is TTFA."""

    text: str
    generated: int  # tokens generated so far, reasoning and answer together
    t: float  # perf_counter() when the text became visible


@dataclass(frozen=True)
class Finished:
    text: str
    stats: ReplyStats
    tokens: tuple[int, ...] = ()  # generated token ids, for checks against llama.cpp
    logprobs: tuple = ()  # every generated token's, when asked (TokenLogprob)


Event = Preparing | PrefillStarted | Progress | FirstToken | ReasoningDelta | TextDelta | Finished
