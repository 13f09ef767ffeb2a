"""Speculative decoding: cheap guesses for the next tokens, checked by the model in one pass.

Decode is one pass over the weights per token; a pass that carries a few more
tokens costs little more on a machine whose decode is bandwidth-bound. So a
guess at the next k tokens is evaluated with the token just sampled, every
row's logits are sampled in order, and the run of guesses the model agrees
with is kept: each check yields the agreeing guesses plus one token of the
model's own.

Correct by construction: each row is sampled by the reply's own Sampler (its
penalties, grammar and logprobs advance token by token, as in the plain loop),
and a guess is kept only when the sampled token equals it. For a guesser that
proposes one token (a point mass), that is exactly the speculative-sampling
rule: a guess d is kept with probability p(d), and a rejected row's sample is
distributed as p without d, renormalised. Greedy replies keep the model's own
choices. (The logits of a row in a batch of k+1 may differ from a one-token
step's in the last bits, as any batch shape's do on a CPU.)

It pays or steps aside: the Pacer times plain steps and checks as the reply
runs and checks only when a check is expected to deliver more tokens a second
than plain steps (a check of several rows costs a fixed part on top of its
rows, so short agreeing runs never pay); should the checks still deliver fewer,
speculation is off for the rest of the reply, with the reason in its stats.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

K_MAX = 8  # guesses per check
# A check's cost before two sizes were timed, in plain steps: a fixed part and a part a row
# (a batch of several rows takes the batched kernels, a one-token step does not).
BASE_PRIOR, ROW_PRIOR = 2.2, 0.4
MARGIN = 1.05  # a check must be expected to beat plain steps by this much
DECAY = 0.95  # the acceptance follows the text: older agreements count less
TRIAL_K = 4  # a draft model's first checks, before its acceptance is known
NGRAM_SIZES = (4, 3, 2)  # the longest earlier match wins
WARMUP_CHECKS = 6  # checks before the Pacer judges
PLAIN_EMA = 0.2
MODES = ("ngram", "draft")


class Drafter(Protocol):
    """What guesses: prompt lookup, or a draft model (app.engine.draft)."""

    mode: str
    catch_up_s: float  # time spent reading the prompt into the guesser, not judged by the Pacer

    def extend(self, tokens: Iterable[int]) -> None: ...

    def propose(self, k: int) -> list[int]: ...


class NgramDrafter:
    """Prompt lookup: guess that the text continues as it did after the latest earlier occurrence
    of its last few tokens (what rewriting, fixing and editing a text do). O(1) per token: each
    n-gram maps to where it was last followed by something."""

    mode = "ngram"
    catch_up_s = 0.0  # its index is built as the tokens come: nothing to catch up

    def __init__(self, history: list[int]):
        self.hist: list[int] = []
        self.index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in NGRAM_SIZES}
        self.extend(history)

    def extend(self, tokens) -> None:
        for t in tokens:
            end = len(self.hist)
            for n in NGRAM_SIZES:
                if end >= n:
                    self.index[n][tuple(self.hist[end - n:end])] = end
            self.hist.append(t)

    def propose(self, k: int) -> list[int]:
        """Up to k guesses at what follows the history."""
        h = self.hist
        for n in NGRAM_SIZES:
            if len(h) <= n:
                continue
            at = self.index[n].get(tuple(h[-n:]))
            if at is not None and at < len(h):
                return h[at:at + k]
        return []


@dataclass
class Pacer:
    """Whether a check would pay, and whether checks are paying.

    Before each step it predicts, for each number k of guesses, the tokens a check would give
    (the agreeing run's expected length, from how often a guess has followed a right one,
    recently) over its cost (a fixed part and a part a row, fitted to the checks timed so far;
    a prior shape until two sizes were seen), against one token per plain step, and guesses only
    when some k beats it. The acceptance is learnt for free too: prompt lookup's guesses that
    are not checked are compared with the tokens the reply then takes. Times are wall clock
    around the step (its decode and the sampling of its rows), the same for both kinds."""

    plain_s: float | None = None  # EMA of one plain step (decode one token, sample it)
    checks: int = 0
    drafted: int = 0
    accepted: int = 0
    check_s: float = 0.0  # all checks' wall time
    check_tokens: int = 0  # tokens the checks delivered (kept guesses + the model's own)
    plain_steps: int = 0
    plain_total_s: float = 0.0
    stepped_aside: str | None = None
    right: float = 0.0  # guesses that agreed after an agreeing one (decayed counts)
    wrong: float = 0.0  # runs that ended in a miss
    fit: list[float] = field(default_factory=lambda: [0.0] * 5)  # n, sum k, sum k^2, sum dt, sum k*dt
    kept_at: list[int] = field(default_factory=lambda: [0] * K_MAX)  # checks that kept the guess at i

    def plain_step(self, dt: float) -> None:
        self.plain_steps += 1
        self.plain_total_s += dt
        self.plain_s = dt if self.plain_s is None else (1 - PLAIN_EMA) * self.plain_s + PLAIN_EMA * dt

    def agreed(self, kept: int, missed: bool) -> None:
        """A run of guesses compared with what the model chose: `kept` agreed, then a miss or not."""
        self.right = self.right * DECAY + kept
        self.wrong = self.wrong * DECAY + missed

    def check(self, drafted: int, kept: int, dt: float) -> None:
        self.checks += 1
        self.drafted += drafted
        self.accepted += kept
        self.check_s += dt
        self.check_tokens += kept + 1
        for i in range(kept):
            self.kept_at[i] += 1
        self.agreed(kept, kept < drafted)
        f = self.fit
        for i, v in enumerate((1.0, drafted, drafted * drafted, dt, drafted * dt)):
            f[i] += v
        ratio = self.check_speedup()
        if self.checks >= WARMUP_CHECKS and ratio is not None and ratio < 1.0:
            self.stepped_aside = (f"checks ran at {ratio:.2f}x a plain step's rate after {self.checks} "
                                  f"({100 * self.acceptance():.0f}% of guesses kept)")

    def cost(self, k: int) -> float:
        """A check of k guesses, in seconds: fitted, or the prior shape through what was seen."""
        assert self.plain_s is not None
        n, sk, skk, sdt, skdt = self.fit
        det = n * skk - sk * sk
        if n >= 2 and det > 1e-9:
            slope = (n * skdt - sk * sdt) / det
            base = (sdt - slope * sk) / n
            if slope >= 0 and base > 0:
                return base + slope * k
        slope = ROW_PRIOR * self.plain_s
        base = (sdt - slope * sk) / n if n else BASE_PRIOR * self.plain_s
        return max(base, self.plain_s) + slope * k

    def best_k(self, limit: int) -> int:
        """How many guesses the next check should carry: 0 when no check is expected to beat a
        plain step."""
        if not self.active or self.plain_s is None:
            return 0
        a = min((self.right + 1) / (self.right + self.wrong + 2), 0.999)
        best, best_rate = 0, MARGIN / self.plain_s
        for k in range(1, min(limit, K_MAX) + 1):
            rate = (1 - a ** (k + 1)) / (1 - a) / self.cost(k)
            if rate > best_rate:
                best, best_rate = k, rate
        return best

    @property
    def active(self) -> bool:
        return self.stepped_aside is None

    @property
    def calibrated(self) -> bool:
        return self.plain_s is not None

    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def check_speedup(self) -> float | None:
        """Tokens a second from checks, over a plain step's."""
        if not self.check_s or not self.plain_s:
            return None
        return (self.check_tokens / self.check_s) * self.plain_s

    def speedup(self) -> float | None:
        """The whole decode's tokens a second (plain steps and checks), over plain steps' alone."""
        spent = self.plain_total_s + self.check_s
        if not spent or not self.plain_s:
            return None
        return (self.plain_steps + self.check_tokens) / spent * self.plain_s


@dataclass
class Speculation:
    """One reply's guesser and its judge."""

    drafter: Drafter
    pacer: Pacer
    # Each check as evaluated: (the KV position of its first token, its tokens). Correctness is
    # "the target's own choice for each row of the same batch", so a check is replayable: the
    # tests and bench --speculative run the same batches again and compare.
    checks: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    guess_s: float = 0.0  # the last guesses' cost, which their check's time includes
    unchecked: list[int] = field(default_factory=list)  # free guesses, compared as the reply goes
    unchecked_kept: int = 0

    @property
    def mode(self) -> str:
        return self.drafter.mode

    def took(self, tok: int) -> None:
        """A token of the reply: the drafter's history, and the unchecked guesses' score."""
        self.drafter.extend((tok,))
        if not self.unchecked:
            return
        if self.unchecked[0] == tok:
            self.unchecked.pop(0)
            self.unchecked_kept += 1
            if not self.unchecked:
                self.pacer.agreed(self.unchecked_kept, False)
        else:
            self.pacer.agreed(self.unchecked_kept, True)
            self.unchecked = []

    def guesses(self, room: int) -> list[int]:
        """The guesses to check with the next step (at most `room`: what the reply and the context
        have left); none while speculation is off, not calibrated (a plain step's cost is the
        yardstick, so a fresh decoder's first step is plain) or not expected to pay, and none
        while unchecked guesses are still being compared."""
        p = self.pacer
        if not p.active or not p.calibrated or room <= 0 or self.unchecked:
            return []
        k = p.best_k(room)
        if k == 0 and self.drafter.mode == "ngram":  # a lookup costs nothing: learn from it unchecked
            self.unchecked, self.unchecked_kept = self.drafter.propose(K_MAX), 0
            return []
        if k == 0:  # a draft's guesses cost its steps: it learns from its first checks
            if p.checks >= WARMUP_CHECKS:
                return []
            k = min(room, TRIAL_K)
        t0, before = time.perf_counter(), self.drafter.catch_up_s
        out = self.drafter.propose(k)
        self.guess_s = time.perf_counter() - t0 - (self.drafter.catch_up_s - before)
        return out
