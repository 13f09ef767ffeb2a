"""The records the batch engine takes in and gives out.

Kept apart from the decode loop so the CLI, the JSONL layer and a Qt panel can
build requests and read results without importing llama.cpp machinery.
Times are perf_counter() seconds relative to the engine's start (`t0`), so a
panel can draw a timeline of slots and tests can compare start/finish order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from app.engine.events import Event
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings


@dataclass
class SlotRequest:
    custom_id: str
    messages: list[MessageBody] = field(default_factory=list)
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    # Pre-tokenized prompt: bypasses chat formatting (benchmarks, tests that
    # compare with Decoder on identical tokens). Stop strings then come only
    # from settings.
    prompt_tokens: list[int] | None = None
    # The text exactly as decoded, whitespace at both ends included (a server's raw
    # /v1/completions); otherwise trimmed like a chat reply.
    verbatim: bool = False
    # Builds the prompt on the engine thread: called as build_prompt(slot_ctx,
    # to_tokens), where to_tokens(msgs) renders messages in the engine's prompt
    # format and tokenizes them; what it returns is decoded, with the format's
    # stop strings plus the request's (as for `messages`). Lets a caller fit
    # the history to the slot (the chat's fit_history). Anything it raises
    # becomes this request's error result.
    build_prompt: Callable[[int, Callable[[list[MessageBody]], list[int]]], list[int]] | None = None
    # Per-request stream (FirstToken, TextDelta, Finished), the same events the
    # Decoder emits, so a chat view can show an online reply served by a batch.
    on_event: Callable[[Event], None] | None = None
    online: bool = False  # set by submit_online(): takes the next free slot first
    line: int | None = None  # input line number, for error records
    # How the client reads the reply (app.openai_compat's tool-call format, say); the engine
    # only hands it on to the result, so whoever writes the answer knows its shape.
    reply_as: object = None
    # A thinking template's reply (app.slots.thinking): "split" hands back its reasoning apart
    # from its answer, "raw" the text as drawn; either way the template's switches (settings.think)
    # and budget apply. None: plain text, no switches (the chat's routed turns, batch files).
    reasoning: str | None = None
    # The request's own chat template kwargs, for a template that reads them.
    template_kwargs: dict = field(default_factory=dict)


@dataclass
class SlotStats:
    """One request's measured record; stamps are seconds since the engine's t0."""

    prompt_tokens: int | None = 0  # None: a remote server did not report it
    completion_tokens: int | None = 0
    # Prompt tokens not evaluated: kept in the slot from its previous request, copied from
    # another sequence that held the same prefix, or loaded from the disk prompt cache.
    cached_tokens: int = 0
    shared_tokens: int = 0  # of cached_tokens, copied from another sequence
    cached_disk_tokens: int = 0  # of cached_tokens, loaded from the disk prompt cache
    stop_reason: str = "stop"  # stop / length / cancelled / error
    slot: int | None = None
    online: bool = False
    queued_at: float = 0.0
    slot_start: float | None = None  # got a slot (prefill begins)
    first_token_at: float | None = None  # first visible text
    finished_at: float | None = None
    ttft_from_queue_s: float | None = None  # what the user waited
    ttft_from_slot_s: float | None = None  # what the decoder took (prefill + 1st step)
    queue_wait_s: float | None = None
    total_s: float | None = None  # queued -> finished
    decode_tok_s: float | None = None  # this request's own rate, first -> last token
    error: str | None = None
    # With an error: "context_overflow" (the prompt cannot fit a slot),
    # "invalid_request" (bad settings or prompt, before a slot is used) or
    # "generation_failed" (llama_decode failed while the request ran).
    error_kind: str | None = None
    grammar_ms_per_token: float | None = None  # keeping to a constraint, per generated token
    # Speculative decoding (app.slots.speculation), when the engine speculates: how it guessed,
    # the guesses checked and kept, the checks, and why it did not (a reply that never decoded
    # alone, or one whose checks did not pay).
    spec_mode: str | None = None
    draft_tokens: int = 0
    draft_accepted: int = 0
    spec_checks: int = 0
    spec_stepped_aside: str | None = None
    # How many checks kept their guess at each position (the first guess, the second, ...).
    draft_accepted_per_pos: list[int] = field(default_factory=list)
    # Of completion_tokens, those a split thinking reply spent before its answer (None: it did not
    # reason, or its reply was not split).
    reasoning_tokens: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class PrefixCounts:
    """Prompt tokens over an engine's life, by where they came from: what tests count (a
    preamble shared by eight slots is evaluated once) and what /metrics' prefix cache reads."""

    prompts: int = 0  # every admitted prompt's tokens
    kept: int = 0  # kept in the slot's own sequence from its last request
    shared: int = 0  # copied from another sequence
    disk: int = 0  # loaded from the disk prompt cache
    evaluated: int = 0  # prefilled


@dataclass
class SlotResult:
    custom_id: str
    text: str
    stats: SlotStats
    line: int | None = None
    reply_as: object = None  # the request's own, handed on
    # Seconds between consecutive tokens of the reply (what /metrics' inter-token histogram
    # observes); kept off `stats`, which batch result files write whole.
    itl_s: Sequence[float] = ()
    # Each sampled token's log-probability (app.engine.logprobs.TokenLogprob; the end-of-generation
    # token's too), when the request asked for them.
    logprobs: Sequence = ()
    reasoning: str = ""  # a split thinking reply's reasoning; `text` is then its answer

    @property
    def ok(self) -> bool:
        return self.stats.error is None and self.stats.stop_reason != "cancelled"


@dataclass(frozen=True)
class BatchProgress:
    """What a progress bar and the slot-occupancy gauge show; >= 4 per second."""

    done: int  # finished requests (errors included), this run
    failed: int
    total: int  # submitted so far, this run
    queued: int
    busy_slots: int
    n_slots: int
    generated: int  # completion tokens, all requests
    elapsed_s: float  # excluding time spent paused
    tok_s: float | None  # aggregate completion tok/s over the last few seconds
    avg_tok_s: float | None  # aggregate completion tok/s over the whole run
    eta_s: float | None
    paused: bool
    online_busy: int = 0  # slots serving online requests (the reserved one included)
    decoding: int = 0  # sequences the last step decoded a token for
    # The fastest aggregate decode for that many sequences here (app.engine.utilization's
    # batched_ceiling), and what binds it: "bandwidth" or "arithmetic"; None for a server.
    ceiling_tok_s: float | None = None
    ceiling_bound: str | None = None
    # KV positions the busy sequences hold (a prefix shared in a unified cache counts once per
    # sequence), and the cells of every sequence at its full length.
    kv_used: int = 0
    kv_cells: int = 0

    @property
    def occupancy(self) -> float:
        return self.busy_slots / self.n_slots if self.n_slots else 0.0


@dataclass(frozen=True)
class RequestStarted:
    custom_id: str
    slot: int
    at: float


@dataclass(frozen=True)
class RequestDone:
    result: SlotResult


BatchEvent = BatchProgress | RequestStarted | RequestDone
