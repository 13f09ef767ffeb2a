"""Sampling settings and the llama.cpp sampler chain built from them.

The chain runs inside llama.cpp (no 262k-float logits copy into Python per
token), which is what keeps the engine's decode rate at the raw loop's.
"""

from __future__ import annotations

import ctypes
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

import llama_cpp
import numpy as np

from app.engine import logprobs
from app.engine.grammar import Constraint, GrammarError, GrammarMatcher
from app.engine.logprobs import MAX_TOP, TokenLogprob

PENALTY_WINDOW = 64  # recent tokens the repeat penalty looks at
INT32_MAX = 2**31 - 1  # max_tokens and top_k reach llama.cpp as int32_t
# The dist sampler takes a uint32_t seed and reads its top value, LLAMA_DEFAULT_SEED,
# as "pick one at random", so a fixed seed stops one short; -1 asks for random.
SEED_MAX = 2**32 - 2
THINK_LEVELS = ("low", "medium", "high")  # gpt-oss's reasoning_effort


class ReasoningHook(Protocol):
    """What the Sampler asks a thinking reply's tracker (app.engine.reasoning.ReasoningTracker)."""

    @property
    def forcing(self) -> bool: ...

    def forced(self) -> int: ...

    def accept(self, tok: int) -> None: ...


@dataclass
class GenerationSettings:
    max_tokens: int = 512
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    seed: int | None = None  # None = a fresh random seed per reply
    stop: tuple[str, ...] = field(default_factory=tuple)
    ignore_eos: bool = False  # benchmarks only: decode exactly max_tokens
    # DRY ("don't repeat yourself"): penalizes a token that would extend a run
    # of text already in the context, the prompt included, so a base model stops
    # copying earlier turns; 0 turns it off.
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2  # runs up to this long are free
    dry_last_n: int = -1  # tokens looked back at; -1: the whole context
    # A model without a chat template is framed by a preamble (app.engine.prompt); False: the bare transcript.
    preamble: bool = True
    # The repeat penalty and DRY count the prompt as text already written (as
    # llama-server does), so copying an earlier turn is repeating; False: the reply alone.
    penalize_prompt: bool = True
    # What the reply must match (a JSON schema, a grammar): app.engine.grammar; None: free text.
    constraint: Constraint | None = None
    # OpenAI's penalties, through llama.cpp's penalties sampler over the same window as the repeat
    # penalty: presence lowers a token that appeared at all, frequency by how often it did.
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # (token id, bias) pairs added to the logits before any other sampler (OpenAI's logit_bias).
    logit_bias: tuple[tuple[int, float], ...] = ()
    # None: no log-probabilities; k: each generated token's, with the k likeliest (0..20).
    logprobs: int | None = None
    # Speculative decoding (app.engine.speculative): None off, "ngram" guesses from the
    # conversation's own text, "draft" from the decoder's draft model. It steps aside by
    # itself when it does not pay.
    speculative: str | None = None
    # A thinking model (app.engine.reasoning): None thinks as its template does by default; True
    # or False where the template has a switch; "low" / "medium" / "high" where it has levels.
    think: bool | str | None = None
    # The most tokens its reasoning may take before the answer is forced to start (None: no limit).
    think_budget: int | None = None
    # The engine's own per-reply hook (app.engine.reasoning.ReasoningTracker), set by the local
    # engine on the settings it decodes with; never recorded or copied between replies.
    reasoning: ReasoningHook | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        d = asdict(replace(self, reasoning=None))
        del d["reasoning"]
        d["stop"] = list(self.stop)
        for name in ("constraint", "think", "think_budget"):
            if d[name] is None:
                del d[name]  # a plain reply's record reads as it always did
        return d

    def validate(self) -> None:
        """Refuse what llama.cpp cannot take: NaN passes every `<` test, and an
        int past its C type is wrapped silently by ctypes into another value."""
        _check_int("max_tokens", self.max_tokens, 1, INT32_MAX)
        _check_int("top_k", self.top_k, 0, INT32_MAX)
        if self.seed is not None:
            _check_int("seed", self.seed, -1, SEED_MAX)
        for name in ("temperature", "top_p", "min_p", "repeat_penalty", "dry_multiplier", "dry_base"):
            _check_real(name, getattr(self, name))
        _check_int("dry_allowed_length", self.dry_allowed_length, 0, INT32_MAX)
        _check_int("dry_last_n", self.dry_last_n, -1, INT32_MAX)
        if self.dry_multiplier < 0:
            raise ValueError(f"dry_multiplier must be >= 0 (0: off), got {self.dry_multiplier}")
        if self.dry_base < 1:
            raise ValueError(f"dry_base must be >= 1, got {self.dry_base}")
        for name in ("preamble", "penalize_prompt", "ignore_eos"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {_show(getattr(self, name))}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repeat_penalty <= 0:
            raise ValueError(f"repeat_penalty must be > 0, got {self.repeat_penalty}")
        if not isinstance(self.stop, tuple | list) or not all(isinstance(x, str) for x in self.stop):
            raise ValueError("stop must be a list of strings")
        if self.constraint is not None and not isinstance(self.constraint, Constraint):
            raise ValueError("constraint must be a Constraint")
        for name in ("presence_penalty", "frequency_penalty"):
            _check_real(name, getattr(self, name))
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise ValueError(f"{name} must be between -2 and 2, got {_show(getattr(self, name))}")
        for tok, bias in self.logit_bias:
            _check_int("logit_bias token", tok, 0, INT32_MAX)
            _check_real("logit_bias value", bias)
            if not -100.0 <= bias <= 100.0:
                raise ValueError(f"logit_bias values must be between -100 and 100, got {_show(bias)}")
        if self.logprobs is not None:
            _check_int("top_logprobs", self.logprobs, 0, MAX_TOP)
        if self.speculative not in (None, "ngram", "draft"):
            raise ValueError(f"speculative must be off, ngram or draft, got {_show(self.speculative)}")
        if not (self.think is None or isinstance(self.think, bool) or
                (isinstance(self.think, str) and self.think in THINK_LEVELS)):
            raise ValueError(f"think must be on, off, low, medium or high, got {_show(self.think)}")
        if self.think_budget is not None:
            _check_int("think_budget", self.think_budget, 0, INT32_MAX)


def _show(v) -> str:
    """A value for an error message, cut so a hostile 4,000-digit number stays one short line."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _check_int(name: str, v, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{name} must be a whole number, got {_show(v)}")
    if v < lo:
        raise ValueError(f"{name} must be at least {lo}, got {_show(v)}")
    if v > hi:
        raise ValueError(f"{name} must be at most {hi}, got {_show(v)}")


def _check_real(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name} must be a number, got {_show(v)}")
    try:
        finite = math.isfinite(v)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise ValueError(f"{name} must be a finite number, got {_show(v)}")


DRY_BREAKERS = (b"\n", b":", b'"', b"*")  # llama.cpp's defaults: a repeat never spans these


class Sampler:
    """Owns one llama_sampler chain; free it with close().

    `seen` is the prompt: the repeat penalty and DRY judge the reply against
    it, as llama-server does, so copying an earlier turn counts as repeating.
    With a constraint, each draw is checked against the grammar and, when
    refused, drawn again from the masked logits (app.engine.grammar); the
    chain then runs through llama_sampler_apply so that only the token kept
    is accepted into the penalties' history, never the refused one.
    """

    def __init__(self, s: GenerationSettings, n_vocab: int, vocab=None, seen: Sequence[int] = ()):
        self.seed = s.seed if s.seed is not None and s.seed >= 0 else random.randrange(SEED_MAX + 1)
        params = llama_cpp.llama_sampler_chain_default_params()
        self.chain = llama_cpp.llama_sampler_chain_init(params)
        add = lambda smpl: llama_cpp.llama_sampler_chain_add(self.chain, smpl)
        penalize = s.repeat_penalty != 1.0 or s.presence_penalty != 0 or s.frequency_penalty != 0
        lowers_only = s.repeat_penalty >= 1.0 and s.presence_penalty >= 0 and s.frequency_penalty >= 0
        dry = s.dry_multiplier > 0 and vocab is not None
        if s.logit_bias:  # first: a raised token must be there for top-k to keep
            if any(tok >= n_vocab for tok, _ in s.logit_bias):
                bad = next(tok for tok, _ in s.logit_bias if tok >= n_vocab)
                raise ValueError(f"logit_bias names token {bad}; this model's vocabulary has {n_vocab}")
            self._bias = (llama_cpp.llama_logit_bias * len(s.logit_bias))(
                *(llama_cpp.llama_logit_bias(tok, bias) for tok, bias in s.logit_bias))
            add(llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(s.logit_bias), self._bias))
        # The penalty and DRY samplers walk every candidate they are given, and
        # over a large vocabulary (Gemma's is 262k) that is a cost paid per
        # token, so top-k runs first (the order llama.h advises). For greedy this
        # is exact: they only lower a few recent tokens, so the winner is in the top 65.
        if s.temperature > 0 and s.top_k > 0:
            add(llama_cpp.llama_sampler_init_top_k(s.top_k))
        elif s.temperature <= 0 and (dry or penalize) and lowers_only:
            add(llama_cpp.llama_sampler_init_top_k(PENALTY_WINDOW + 1))
        if penalize:
            add(llama_cpp.llama_sampler_init_penalties(n_vocab, PENALTY_WINDOW, s.repeat_penalty,
                                                       s.frequency_penalty, s.presence_penalty))
        if dry:
            self._breakers = (ctypes.c_char_p * len(DRY_BREAKERS))(*DRY_BREAKERS)
            add(llama_cpp.llama_sampler_init_dry(vocab, s.dry_multiplier, s.dry_base, s.dry_allowed_length,
                                                 s.dry_last_n, self._breakers, len(DRY_BREAKERS)))
        if s.temperature <= 0:
            add(llama_cpp.llama_sampler_init_greedy())
        else:
            if s.top_p < 1.0:
                add(llama_cpp.llama_sampler_init_top_p(s.top_p, 1))
            if s.min_p > 0:
                add(llama_cpp.llama_sampler_init_min_p(s.min_p, 1))
            add(llama_cpp.llama_sampler_init_temp(s.temperature))
            add(llama_cpp.llama_sampler_init_dist(self.seed))
        if (penalize or dry) and s.penalize_prompt:
            # Only what they can look back at: the penalty keeps the last
            # PENALTY_WINDOW tokens, DRY its own window (or all of it with -1).
            back = len(seen) if dry and s.dry_last_n < 0 else max(
                PENALTY_WINDOW if penalize else 0, s.dry_last_n if dry else 0)
            for tok in seen[len(seen) - min(back, len(seen)):]:
                llama_cpp.llama_sampler_accept(self.chain, tok)
        # Greedy and nothing else: the argmax of the logits row is that sampler's choice (the
        # first maximum, as llama.cpp's greedy picks it), without the chain building a
        # candidate array the size of the vocabulary for every token.
        self.n_vocab = n_vocab
        self.argmax = llama_cpp.llama_sampler_chain_n(self.chain) == 1 and s.temperature <= 0
        try:
            self.grammar = None if s.constraint is None else GrammarMatcher(s.constraint, vocab, n_vocab)
        except BaseException:
            self.close()  # the chain is made already; the caller never gets this sampler to close
            raise
        self.top_logprobs = s.logprobs  # None: not asked
        # A thinking model's per-reply tracker: told every token; while it forces the end of the
        # reasoning (the budget is spent), its token is the sample.
        self.reasoning = s.reasoning
        self.last: TokenLogprob | None = None  # the last token's, when asked
        self._cands: ctypes.Array | None = None  # llama_token_data[n_vocab], on the first constrained draw

    def _row(self, ctx, idx: int) -> np.ndarray:
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, idx), shape=(self.n_vocab,))

    def sample(self, ctx, idx: int = -1) -> int:
        """The next token from row `idx` of the last decode's logits (its log-probability, when
        asked, in `last`: from the model's logits before any sampler or grammar changed them)."""
        r = self.reasoning
        if r is None:
            return self._logged(ctx, idx)
        tok = self._logged(ctx, idx, r.forced() if r.forcing else None)
        r.accept(tok)
        return tok

    def _logged(self, ctx, idx: int, forced: int | None = None) -> int:
        if self.top_logprobs is None:
            return self._sample(ctx, idx) if forced is None else self._force(forced)
        row = self._row(ctx, idx)
        lse = logprobs.log_normalizer(row)
        top = logprobs.top_of(row, lse, self.top_logprobs)
        raw = row.copy() if self.grammar is not None else row  # a refused draw masks the row in place
        tok = self._sample(ctx, idx) if forced is None else self._force(forced)
        self.last = logprobs.TokenLogprob(tok, float(raw[tok]) - lse, top)
        return tok

    def _force(self, tok: int) -> int:
        """The reasoning budget's token instead of a draw: accepted as a drawn one would be."""
        g = self.grammar
        if g is not None:
            if not g.allows(tok):
                raise GrammarError("the reply's format does not allow ending the reasoning where "
                                   "the thinking budget ran out")
            g.accept(tok)
        if not self.argmax:
            llama_cpp.llama_sampler_accept(self.chain, tok)
        return tok

    def _sample(self, ctx, idx: int) -> int:
        g = self.grammar
        if g is None:
            if self.argmax:
                return int(self._row(ctx, idx).argmax())
            return llama_cpp.llama_sampler_sample(self.chain, ctx, idx)
        tok = self._draw(ctx, idx)
        if not g.allows(tok):
            g.mask_row(self._row(ctx, idx))  # in the context's own buffer: the redraw reads it
            tok = self._draw(ctx, idx)
        g.accept(tok)
        if not self.argmax:
            llama_cpp.llama_sampler_accept(self.chain, tok)
        return tok

    def _draw(self, ctx, idx: int) -> int:
        """One draw without accepting it: argmax, or the chain applied to every token's logit."""
        row = self._row(ctx, idx)
        if self.argmax:
            return int(row.argmax())
        if self._cands is None:
            self._cands = (llama_cpp.llama_token_data * self.n_vocab)()
            self._view = np.ctypeslib.as_array(self._cands).view(
                np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]))
            self._ids = np.arange(self.n_vocab, dtype=np.int32)
        self._view["id"] = self._ids  # every draw: the chain sorts and cuts the array in place
        self._view["logit"] = row
        self._view["p"] = 0.0
        cur = llama_cpp.llama_token_data_array(self._cands, self.n_vocab, -1, False)
        llama_cpp.llama_sampler_apply(self.chain, ctypes.byref(cur))
        return int(self._view["id"][cur.selected])

    def close(self) -> None:
        if self.chain is not None:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
