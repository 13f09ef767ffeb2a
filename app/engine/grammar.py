"""Constrained decoding: replies that must match a JSON schema, any JSON, a grammar or a regex.

LLGuidance (PyPI `llguidance`) enforces them: on Gemma's 262k-token
vocabulary it computes a token mask in a fraction of a millisecond, where
llama.cpp's own GBNF sampler takes longer than a whole decode step of the
bundled model (measured side by side by `llamadesk bench --structured`).
XGrammar was the other candidate; its Python package pulls in PyTorch (GBs)
and compiles grammars in seconds, not milliseconds.

The mask is computed only when needed: the sampler's own choice is checked
first (a few microseconds), and only when the grammar refuses it is the full
mask computed, applied to the logits and the token sampled again. For greedy
decoding that is exactly the constrained argmax; for sampling it is the
rejection scheme llama.cpp's own grammar sampler uses (an accepted draw has
the probability it had; a refused one is redrawn from the masked rows).

A constraint the engine cannot enforce is refused before decoding starts,
naming the construct (GrammarError), never answered unconstrained. Some
grammars compile and then blow up in the matcher: a pattern like `a{1000000}`
exhausts the lexer at the first character, an object that requires itself the
parser's item limit at the second token. The compiler's work is bounded
(LIMITS), `$ref`s that recurse without end are refused by reading the schema
(app.engine.schema_refs), and every new matcher first walks a few tokens on a
copy of itself (PROBE_TOKENS), so those are refused before the first token
too. A grammar that still fails later ends its own reply with the error.

JSON grammars leave a number's digits unbounded, and a small model that
starts "1000" can write zeros until max_tokens cuts the reply into invalid
JSON. A run of digits in a JSON reply is therefore held to MAX_DIGIT_RUN
(far past what a double or any id needs): past it, digit tokens are refused
wherever the grammar allows something else, so the number ends and the
reply stays valid.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.engine import vocabulary
from app.engine.errors import EngineError
from app.engine.schema_refs import endless_ref

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

KINDS = ("json_schema", "json_object", "lark", "gbnf", "regex")
# Any JSON object, with whitespace as a model writes it: what response_format json_object promises.
ANY_OBJECT = {"type": "object"}
# Compact JSON as people write it on one line: a small model given free whitespace inside an
# object can fill its whole budget with newlines (seen with the bundled 270M model).
JSON_OPTIONS: JsonCompileOptions = {"whitespace_flexible": False, "item_separator": ", ",
                                    "key_separator": ": "}
_COMPILED_MAX = 128  # distinct grammars kept compiled (a server's clients reuse a few schemas)
MAX_DIGIT_RUN = 20  # the digits of every 64-bit integer; a double's shortest form needs 17
# The lexer's fuel for building a grammar's regexes, a fifth of LLGuidance's default: every
# schema of bench --structured needs far less, and a blow-up is refused sooner.
INITIAL_LEXER_FUEL = 200_000
PROBE_TOKENS = 4  # tokens a new matcher's copy walks before the reply starts


def limits():
    """LLGuidance's resource limits for every compile and matcher (its other defaults kept)."""
    from llguidance import LLParserLimits

    return LLParserLimits(initial_lexer_fuel=INITIAL_LEXER_FUEL, verbose_errors=False)


class GrammarError(EngineError):
    """The constraint cannot be enforced: malformed, or a construct the compiler does not support."""


@dataclass(frozen=True)
class Constraint:
    """What a reply must match: `kind` one of KINDS, `source` the schema (JSON text) or grammar."""

    kind: str
    source: str

    @classmethod
    def json_schema(cls, schema: dict | bool) -> Constraint:
        # Keys in the schema's own order: LLGuidance writes properties in that order.
        return cls("json_schema", json.dumps(schema, ensure_ascii=False))

    @classmethod
    def any_json(cls) -> Constraint:
        return cls.json_schema(ANY_OBJECT)

    def to_json(self) -> dict:
        return {"kind": self.kind, "source": self.source}

    @classmethod
    def from_json(cls, d) -> Constraint | None:
        if d is None:
            return None
        if not isinstance(d, dict) or d.get("kind") not in KINDS or not isinstance(d.get("source"), str):
            raise ValueError("a constraint is {\"kind\", \"source\"} with kind one of " + ", ".join(KINDS))
        return cls(d["kind"], d["source"])


_lock = threading.Lock()
_compiled: OrderedDict[Constraint, str] = OrderedDict()


def compile_grammar(c: Constraint) -> str:
    """The LLGuidance grammar for `c`, compiled once per distinct constraint; GrammarError names
    what cannot be enforced."""
    with _lock:
        hit = _compiled.get(c)
        if hit is not None:
            _compiled.move_to_end(c)
            return hit
    from llguidance import LLMatcher

    try:
        if c.kind == "json_schema" or c.kind == "json_object":
            _no_endless_ref(c)
            grammar = LLMatcher.grammar_from_json_schema(c.source, defaults=JSON_OPTIONS)
        elif c.kind == "regex":
            grammar = LLMatcher.grammar_from_regex(c.source)
        elif c.kind == "gbnf":
            from llguidance.gbnf_to_lark import any_to_lark

            grammar = LLMatcher.grammar_from_lark(any_to_lark(c.source))
        elif c.kind == "lark":
            grammar = LLMatcher.grammar_from_lark(c.source)
        else:
            raise GrammarError(f"unknown constraint kind {c.kind!r} (one of {', '.join(KINDS)})")
    except GrammarError:
        raise
    except Exception as e:  # noqa: BLE001 - the compilers raise ValueError, RuntimeError or their own
        raise GrammarError(f"the {_what(c)} cannot be enforced: {_one_line(e)}") from None
    problem = LLMatcher.validate_grammar(grammar, limits=limits())
    if problem and not problem.startswith("WARNING"):
        raise GrammarError(f"the {_what(c)} cannot be enforced: {_one_line(problem)}")
    with _lock:
        _compiled[c] = grammar
        while len(_compiled) > _COMPILED_MAX:
            _compiled.popitem(last=False)
    return grammar


def _no_endless_ref(c: Constraint) -> None:
    try:
        schema = json.loads(c.source)
    except ValueError:
        return  # the compiler says what is wrong with the text
    ref = endless_ref(schema)
    if ref is not None:
        raise GrammarError(f"the {_what(c)} cannot be enforced: its $ref {ref!r} recurses without end "
                           "(no finite value matches it)")


def check(c: Constraint, vocab, n_vocab: int) -> None:
    """GrammarError now, naming the problem, when `c` cannot be kept to on this vocabulary: what
    a server asks before it accepts a request, off its engine thread."""
    GrammarMatcher(c, vocab, n_vocab)


def _what(c: Constraint) -> str:
    return {"json_schema": "JSON schema", "json_object": "JSON format", "lark": "grammar",
            "gbnf": "GBNF grammar", "regex": "regular expression"}.get(c.kind, "constraint")


def _error_line(text: str) -> str:
    """The matcher's error without the parser state it appends (`<state>` onwards)."""
    return _one_line(text.split("<state>", 1)[0].replace("<non-verbose/>", "")) or "the matcher failed"


def _one_line(e) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 300 else text[:297] + "..."


class GrammarMatcher:
    """One reply's position in its grammar, and the time spent keeping to it."""

    def __init__(self, c: Constraint, vocab, n_vocab: int):
        from llguidance import LLMatcher

        grammar = compile_grammar(c)
        self.matcher = LLMatcher(vocabulary.tokenizer_for(vocab), grammar, log_level=0, limits=limits())
        self.n_vocab = n_vocab
        self._mask = np.zeros((n_vocab + 31) // 32, dtype=np.int32)
        self._probe_once(c, vocab)
        is_json = c.kind in ("json_schema", "json_object")
        self.digits = vocabulary.digits_for(vocab, n_vocab) if is_json else None
        self.run = 0  # digits at the end of the reply so far
        self.seconds = 0.0  # checking, masking and consuming, over the reply
        self.masked = 0  # tokens the grammar refused and that were drawn again
        self.tokens = 0

    def _probe_once(self, c: Constraint, vocab) -> None:
        """Probe `c` on this vocabulary unless it passed already: the server tries a request's
        constraint before queueing it, and its slot's matcher need not walk the same tokens."""
        probed: OrderedDict[Constraint, None] = vocabulary.memo(vocab).setdefault("probed", OrderedDict())
        with _lock:
            if c in probed:
                probed.move_to_end(c)
                return
        problem = self._probe()
        if problem is not None:
            raise GrammarError(f"the {_what(c)} cannot be enforced: {problem}")
        with _lock:
            probed[c] = None
            while len(probed) > _COMPILED_MAX:
                probed.popitem(last=False)

    def _probe(self) -> str | None:
        """What goes wrong within the first PROBE_TOKENS tokens, on a copy of the matcher, always
        taking the lowest token id allowed (the blow-ups come from the grammar, not the path)."""
        m = self.matcher.deep_copy()
        mask = np.zeros_like(self._mask)
        for _ in range(PROBE_TOKENS):
            if m.is_error() or m.is_stopped():
                break
            m.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
            allowed = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.n_vocab])
            if m.is_error():
                break
            if allowed.size == 0:
                return "no token can start a reply that matches it"
            m.consume_token(int(allowed[0]))
        return _error_line(m.get_error()) if m.is_error() else None

    def _capped(self) -> bool:
        return self.digits is not None and self.run >= MAX_DIGIT_RUN

    def allows(self, tok: int) -> bool:
        t = time.perf_counter()
        ok = self.matcher.validate_tokens([tok]) == 1
        if ok and self._capped() and self.digits is not None and self.digits.only[tok]:
            ok = False
        self.seconds += time.perf_counter() - t
        return ok

    def mask_row(self, row: np.ndarray) -> None:
        """Set every refused token's logit in `row` (the context's own buffer) to -inf."""
        t = time.perf_counter()
        self.matcher.unsafe_compute_mask_ptr(self._mask.ctypes.data, self._mask.nbytes)
        allowed = np.unpackbits(self._mask.view(np.uint8), bitorder="little")[: self.n_vocab].astype(bool)
        if self._capped() and self.digits is not None:
            ended = allowed & ~self.digits.only
            if ended.any():  # where only digits may follow, the grammar's own rule wins
                allowed = ended
        row[~allowed] = -np.inf
        self.masked += 1
        self.seconds += time.perf_counter() - t

    def accept(self, tok: int) -> None:
        t = time.perf_counter()
        if not self.matcher.consume_token(tok):
            raise GrammarError(f"the constraint failed after {self.tokens} tokens: "
                               f"{_error_line(self.matcher.get_error())}")
        if self.digits is not None:
            tail = int(self.digits.trailing[tok])
            self.run = self.run + tail if self.digits.only[tok] else tail
        self.tokens += 1
        self.seconds += time.perf_counter() - t

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing more (but the end of the reply)."""
        return self.matcher.is_stopped()

    def ms_per_token(self) -> float | None:
        return self.seconds * 1000 / self.tokens if self.tokens else None
