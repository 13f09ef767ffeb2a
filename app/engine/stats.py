"""The one measured record per reply.

The same record feeds the gauges, the store and the exports, so a number a
user sees in the window is the number in the transcript and in `ask --json`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

# Below this many prompt tokens the prefill is shown as the time it took, not a rate.
PREFILL_RATE_MIN_TOKENS = 32
# A format's setup is named beside TTFT from this long: a grammar compiles in milliseconds, and
# only a model's first constrained reply, indexing its vocabulary, takes longer.
SETUP_NAMED_S = 0.05
SPEC_LABELS = {"ngram": "prompt lookup", "draft": "draft model", "server": "the server's guesses"}
# Why the reply ended, in words ("stop: stop" read as a stutter).
ENDINGS = {"stop": "finished", "length": "max tokens reached", "cancelled": "stopped",
           "error": "failed"}


@dataclass
class ReplyStats:
    """None in a count or time means "not reported": a remote server may not tell
    it, and a figure nobody measured is never filled in with a guess."""

    ttft_s: float | None  # request submitted -> first visible text (None: no text)
    prefill_tokens: int | None  # prompt tokens evaluated for this reply
    cached_tokens: int | None  # prompt tokens reused from the KV cache
    prefill_s: float | None  # the engine's compute time of the prefill
    prefill_tok_s: float | None
    decode_tokens: int | None  # tokens generated: the reply's length
    decode_s: float | None  # the engine's compute time of the decode steps
    decode_tok_s: float | None  # the engine's own decode rate: decode_sampled / decode_s
    total_s: float  # wall clock, request submitted -> reply complete
    kv_used: int | None  # cells of the KV cache in use after the reply
    n_ctx: int | None
    stop_reason: str  # stop / length / cancelled / error
    prompt_tokens: int | None = 0  # cached + prefilled
    wall_decode_tok_s: float | None = None  # the rate as the reader saw it
    dropped_messages: int = 0  # history turns left out to fit the context
    dropped_tokens: int = 0
    error: str | None = None
    # Of cached_tokens, how many were loaded from the prompt cache on disk for
    # this reply; the rest were still in this run's memory.
    cached_disk_tokens: int = 0
    # Where the reply was computed: None for this process's llama.cpp, else the
    # server ("llama-server at 127.0.0.1:8080"); its figures are the server's.
    source: str | None = None
    # Of the machine's peak memory read rate, the share this reply's decode used (CPU only):
    # bytes a step reads x decode tok/s / the probed peak (app.engine.utilization).
    bw_utilization: float | None = None
    # Time keeping the reply to its constraint (checking, masking, redrawing) per generated
    # token, part of every decode step; None for a free-text reply.
    grammar_ms_per_token: float | None = None
    # Speculative decoding (app.engine.speculative): how it guessed ("ngram", "draft", "server"
    # for a remote server's timings.draft_n; None: it did not), the guesses the model checked
    # and kept, the checks, why it stepped aside (None: it did not), and the rate this reply
    # would have decoded at without it, from the measured cost of a one-token step.
    spec_mode: str | None = None
    draft_tokens: int = 0
    draft_accepted: int = 0
    spec_checks: int = 0
    spec_stepped_aside: str | None = None
    plain_tok_s: float | None = None
    # The tokens decode_s timed: those sampled from decode steps' logits. The reply's first token
    # comes from the prefill's (its time is TTFT's), and the last step of a reply the model ended
    # samples the end-of-generation token, so this is decode_tokens - 1, or decode_tokens when
    # the model ended it: the tokens the decode wrote into the KV cache. None: a server's record,
    # whose rate is over its own count (decode_tokens).
    decode_sampled: int | None = None
    # The context had room for this many reply tokens beside the prompt, fewer than max tokens
    # asked for (None: max tokens applied).
    reply_limit: int | None = None
    # Setting up the constraint before the prompt was read (part of the wait before prefill):
    # compiling the grammar, and on a model's first constrained reply indexing its vocabulary,
    # which then stays built for the model. None: a free-text reply, or a server's record.
    grammar_setup_s: float | None = None
    # Where the model's layers ran for this reply (this process's llama.cpp; None for a
    # server's record): gpu_layers of layers_total on gpu_device ("llvmpipe (LLVM 15.0.6,
    # 256 bits)", "NVIDIA H200"), the rest on the CPU. gpu_layers 0: all on the CPU.
    gpu_layers: int | None = None
    layers_total: int | None = None
    gpu_device: str | None = None
    # What wrote it, as a reply's other versions are told apart by: the model and the sampling
    # settings ("gemma-3-270m.gguf · temperature 0.8 · top-p 0.95 · top-k 40"); None: not said.
    made_with: str | None = None
    # A thinking model's reply: of decode_tokens, those spent reasoning (None: no reasoning, or a
    # server that did not count them), the time from the first reasoning token to the end of
    # the reasoning, and the time to the first *answer* token (TTFT is the first token of
    # either: what the reader first sees moving). All None for a reply with no reasoning.
    reasoning_tokens: int | None = None
    reasoning_s: float | None = None
    ttfa_s: float | None = None

    def __post_init__(self) -> None:
        """A local record from before decode_sampled, or from an engine that does not fill it (a
        batch slot's wall clock), always rated its decode over this count: rate x time gives it
        back exactly, so the footer's count is the one its rate divides."""
        if self.decode_sampled is None and self.source is None and self.decode_tok_s and self.decode_s:
            n = self.decode_tok_s * self.decode_s
            if math.isfinite(n) and 0 <= n < 2**31:  # an imported file may hold anything
                self.decode_sampled = round(n)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> ReplyStats:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @property
    def remote(self) -> bool:
        return self.source is not None

    def ttft(self) -> Figure | None:
        return duration(self.ttft_s)

    def prefill(self) -> Figure | None:
        """The prefill as the gauges' tile and the footer show it: a rate, or under
        PREFILL_RATE_MIN_TOKENS the time it took (a rate over a handful of tokens is mostly
        the fixed cost of one llama_decode call, and reads as a slow machine)."""
        if self.prefill_tokens is not None and self.prefill_tokens < PREFILL_RATE_MIN_TOKENS \
                and self.prefill_s is not None:
            return duration(self.prefill_s)
        return rate(self.prefill_tok_s, 0)

    def decode(self) -> Figure | None:
        return rate(self.decode_tok_s, 1)

    def decode_count(self) -> int | None:
        """The tokens the decode rate is over (decode_sampled; a server's own count when the
        record has none)."""
        return self.decode_sampled if self.decode_sampled is not None else self.decode_tokens

    def prefill_words(self) -> str:
        """'97 tok in 240.3 ms @ 404 tok/s': count, time and rate, as the footer and the exports
        say them (a reader can redo the division), or what the server did not report."""
        return phase_words(self.prefill_tokens, self.prefill_s, self.prefill(), self.remote)

    def decode_words(self) -> str:
        return phase_words(self.decode_count(), self.decode_s, self.decode(), self.remote)

    def speculation(self) -> str | None:
        """'n-gram guesses: 31 of 40 kept (78%), 2.1 a check, 1.40x': what speculating was worth."""
        if self.spec_mode is None:
            return None
        speedup = self.decode_tok_s / self.plain_tok_s if self.decode_tok_s and self.plain_tok_s else None
        return speculation_words(self.spec_mode, self.draft_tokens, self.draft_accepted,
                                 self.spec_checks, speedup, self.spec_stepped_aside)

    def grammar(self) -> Figure | None:
        """What keeping to the constraint cost per generated token (grammar_figure)."""
        return grammar_figure(self.grammar_ms_per_token)

    def setup_named(self) -> Figure | None:
        """The format's setup, when long enough to explain part of TTFT (SETUP_NAMED_S)."""
        s = self.grammar_setup_s
        return duration(s) if s is not None and s >= SETUP_NAMED_S else None

    def ttfa(self) -> Figure | None:
        """Time to the first answer token, apart from TTFT only when reasoning came first."""
        return duration(self.ttfa_s)

    def thought(self) -> str | None:
        """'Thought for 12.4 s · 431 tokens': the reasoning as its folded block, the footer and
        the exports name it (None: the reply had none)."""
        if self.reasoning_s is None and self.reasoning_tokens is None:
            return None
        # Seconds to one decimal, as the live block's clock counts them (duration's "3400 ms"
        # would read as another unit from the one the block just showed).
        parts = [f"Thought for {self.reasoning_s:.1f} s" if self.reasoning_s is not None else "Thought"]
        if self.reasoning_tokens is not None:
            parts.append(f"{self.reasoning_tokens} tokens")
        return " · ".join(parts)

    def offload(self) -> str | None:
        """'19/19 layers on llvmpipe (LLVM 15.0.6, 256 bits)': where the layers ran, when any ran
        on a GPU (a reply all on the CPU says nothing: the model bar says why)."""
        if not self.gpu_layers:
            return None
        total = f"/{self.layers_total}" if self.layers_total else ""
        return f"{self.gpu_layers}{total} layers on {self.gpu_device or 'the GPU'}"

    def kv(self) -> str | None:
        """'173/4096': the KV cells in use after the reply, of the context."""
        return f"{self.kv_used}/{self.n_ctx}" if self.kv_used is not None else None

    def total(self) -> str:
        return f"{self.total_s:.2f} s"

    def ended(self) -> str:
        if self.stop_reason == "length" and self.reply_limit is not None:
            return "the context's limit reached"
        return ENDINGS.get(self.stop_reason, self.stop_reason)

    def limited(self) -> str | None:
        """'reply limited to 415 tokens by the context', when the context clamped max tokens."""
        return None if self.reply_limit is None else \
            f"reply limited to {self.reply_limit} tokens by the context"

    def summary(self) -> str:
        """The one-line footer shown under a message and on the CLI's stderr.

        Every figure in it comes from the methods above, which the gauges, the
        timeline and the exports call too: a number shown twice is formatted once."""
        nr = "not reported"
        remote = self.remote
        ttft = str(self.ttft() or "-")
        if remote and self.ttft_s is not None and self.prefill_s is not None:
            ttft += f" (server prefill {self.prefill_s * 1000:.0f} ms)"
        if self.setup_named():
            ttft += f" (format setup {self.setup_named()})"

        def n(v) -> str:
            return nr if v is None else str(v)

        decode = f"decode {self.decode_words()}"
        if remote and self.wall_decode_tok_s:
            unit = "tok/s" if self.decode_tokens is not None else "deltas/s"
            decode += f" (received at {self.wall_decode_tok_s:.1f} {unit})"
        if self.grammar() is not None:
            decode += f" · grammar {self.grammar()}"
        cached = n(self.cached_tokens) + (f" ({self.cached_disk_tokens} from disk)"
                                          if self.cached_disk_tokens else "")
        kv = f"KV {self.kv()}" if self.kv_used is not None else (
            f"KV {nr}" + (f" (ctx {self.n_ctx})" if self.n_ctx else ""))
        parts = [
            f"TTFT {ttft}",
            *([f"first answer {self.ttfa()}"] if self.ttfa() is not None else []),
            *([f"thought {self.reasoning_tokens} tok"] if self.reasoning_tokens is not None else []),
            f"prefill {self.prefill_words()}",
            f"cached {cached}",
            *([f"reply {self.decode_tokens} tok"] if self.decode_tokens is not None else []),
            decode,
            kv,
            f"total {self.total()}",
            self.ended(),
        ]
        if self.limited():
            parts.append(str(self.limited()))
        if self.offload():
            parts.append(str(self.offload()))
        if self.speculation():
            parts.append(str(self.speculation()))
        if self.dropped_messages:
            parts.append(f"dropped {self.dropped_messages} msgs ({self.dropped_tokens} tok)")
        if remote:
            parts.append(f"on {self.source}")
        return " · ".join(parts)

    def details(self) -> list[tuple[str, str]]:
        """Every reported figure as a labelled line, for an export's table: the footer's own
        wording for the figures it has, and only what was measured (nothing "None")."""
        rows: list[tuple[str, str]] = [("time to first token", str(self.ttft() or "no text"))]
        if self.ttfa() is not None:
            rows.append(("time to first answer token", str(self.ttfa())))
        if self.thought() is not None:
            rows.append(("reasoning", str(self.thought())))
        if self.prompt_tokens is not None:
            rows.append(("prompt", f"{self.prompt_tokens} tok"))
        if self.cached_tokens is not None:
            disk = f" ({self.cached_disk_tokens} from disk)" if self.cached_disk_tokens else ""
            rows.append(("cached", f"{self.cached_tokens} tok{disk}"))
        if self.prefill_tokens is not None or self.prefill_s is not None:
            rows.append(("prefill", self.prefill_words()))
        if self.decode_tokens is not None:
            rows.append(("reply", f"{self.decode_tokens} tok"))
        if self.decode_count() is not None or self.decode_s is not None:
            rows.append(("decode", self.decode_words()))
        if self.limited():
            rows.append(("reply limit", f"{self.reply_limit} tok, by the context"))
        if self.wall_decode_tok_s:
            rows.append(("received at", str(rate(self.wall_decode_tok_s, 1))))
        if self.kv() is not None:
            rows.append(("KV cache", self.kv() or ""))
        elif self.n_ctx:
            rows.append(("context", f"{self.n_ctx} tok"))
        if self.bw_utilization is not None:
            rows.append(("memory bandwidth", f"{100 * self.bw_utilization:.0f}% of peak"))
        if self.grammar_ms_per_token is not None:
            rows.append(("grammar", str(self.grammar())))
        if self.grammar_setup_s is not None:
            rows.append(("format setup", str(duration(self.grammar_setup_s))))
        if self.offload():
            rows.append(("GPU offload", str(self.offload())))
        if self.speculation():
            rows.append(("speculative decoding", str(self.speculation())))
        rows.append(("total", self.total()))
        rows.append(("ended", self.ended()))
        if self.dropped_messages:
            rows.append(("left out", f"{self.dropped_messages} msgs ({self.dropped_tokens} tok)"))
        if self.error:
            rows.append(("error", self.error))
        if self.source:
            rows.append(("computed on", self.source))
        return rows


@dataclass(frozen=True)
class Figure:
    """A number as shown, with its unit: the gauges' tiles show the parts, the footer the whole."""

    value: str
    unit: str

    def __str__(self) -> str:
        return f"{self.value} {self.unit}"


def grammar_figure(ms: float | None) -> Figure | None:
    """A constraint's cost per generated token, live in the gauges and after in the footer and
    exports alike: microseconds under one millisecond (LLGuidance's usual tens of them would
    read "0.00 ms"), milliseconds above."""
    if ms is None:
        return None
    return Figure(f"{ms * 1000:.0f}", "µs/tok") if ms < 1 else Figure(f"{ms:.2f}", "ms/tok")


def duration(s: float | None) -> Figure | None:
    """'256 ms' under 10 s, '12.3 s' above: the one way a short time reads everywhere."""
    if s is None:
        return None
    return Figure(f"{s * 1000:.0f}", "ms") if s < 10 else Figure(f"{s:.1f}", "s")


def rate(tok_s: float | None, digits: int) -> Figure | None:
    return Figure(f"{tok_s:.{digits}f}", "tok/s") if tok_s else None


def span(s: float) -> Figure:
    """A phase's time beside its rate, to four significant digits ('1574 ms', '240.3 ms',
    '12.34 s'): enough that tokens / this time gives the rate shown, to its last digit or
    within one of it; duration()'s three digits would not."""
    ms = s * 1000
    if s >= 100:
        return Figure(f"{s:.1f}", "s")
    if s >= 10:
        return Figure(f"{s:.2f}", "s")
    digits = 0 if ms >= 1000 else 1 if ms >= 100 else 2 if ms >= 10 else 3
    return Figure(f"{ms:.{digits}f}", "ms")


def phase_words(count: int | None, took: float | None, shown: Figure | None, remote: bool) -> str:
    """A phase as the footer and the exports say it: '15 tok in 1574 ms @ 9.5 tok/s' (a rate),
    '12 tok in 45 ms' (a short prompt's time), or what a server did not report."""
    nr = "not reported"
    if count is None and shown is None:
        return nr if remote else "- tok"
    head = f"{nr if count is None else count} tok"
    if shown is not None and shown.unit != "tok/s":  # the time alone: no rate over so few
        return f"{head} in {shown}"
    if took is not None and shown is not None:
        return f"{head} in {span(took)} @ {shown}"
    if took is not None and count:
        return f"{head} in {span(took)}"
    return f"{head} @ {shown}" if shown is not None else (f"{head} @ rate {nr}" if remote else head)


def speculation_words(mode: str, drafted: int, accepted: int, checks: int, speedup: float | None,
                      stepped_aside: str | None) -> str:
    """Speculation in one line, live in the gauges and after in the footer and exports alike."""
    label = SPEC_LABELS.get(mode, mode)
    kept = (f"{accepted} of {drafted} guesses kept ({100 * accepted / drafted:.0f}%)" if drafted
            else "no guesses yet")
    if drafted and checks:  # a server reports no checks (llama-server's timings have none)
        kept += f", {accepted / checks:.1f} per check"
    speed = f", {speedup:.2f}x" if speedup else ""
    aside = f"; stepped aside: {stepped_aside}" if stepped_aside else ""
    return f"{label}: {kept}{speed}{aside}"
