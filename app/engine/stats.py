"""The one measured record per reply.

The same record feeds the gauges, the store and the exports, so a number a
user sees in the window is the number in the transcript and in `ask --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass
class ReplyStats:
    """None in a count or time means "not reported": a remote server may not tell
    it, and a figure nobody measured is never filled in with a guess."""

    ttft_s: float | None  # request submitted -> first visible text (None: no text)
    prefill_tokens: int | None  # prompt tokens evaluated for this reply
    cached_tokens: int | None  # prompt tokens reused from the KV cache
    prefill_s: float | None  # the engine's compute time of the prefill
    prefill_tok_s: float | None
    decode_tokens: int | None  # tokens generated
    decode_s: float | None  # the engine's compute time of the decode steps
    decode_tok_s: float | None  # the engine's own decode rate
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

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> ReplyStats:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def summary(self) -> str:
        """The one-line footer shown under a message and on the CLI's stderr."""
        nr = "not reported"
        remote = self.source is not None
        ttft = f"{self.ttft_s * 1000:.0f} ms" if self.ttft_s is not None else "-"
        if remote and self.ttft_s is not None and self.prefill_s is not None:
            ttft += f" (server prefill {self.prefill_s * 1000:.0f} ms)"

        def n(v) -> str:
            return nr if v is None else str(v)

        def phase(name: str, count: int | None, rate: float | None, digits: int) -> str:
            if count is None and rate is None and remote:
                return f"{name} {nr}"
            shown = f"{rate:.{digits}f} tok/s" if rate else (f"rate {nr}" if remote else "- tok/s")
            return f"{name} {n(count)} tok @ {shown}"

        decode = phase("decode", self.decode_tokens, self.decode_tok_s, 1)
        if remote and self.wall_decode_tok_s:
            unit = "tok/s" if self.decode_tokens is not None else "deltas/s"
            decode += f" (received at {self.wall_decode_tok_s:.1f} {unit})"
        cached = n(self.cached_tokens) + (f" ({self.cached_disk_tokens} from disk)"
                                          if self.cached_disk_tokens else "")
        kv = f"KV {self.kv_used}/{self.n_ctx}" if self.kv_used is not None else (
            f"KV {nr}" + (f" (ctx {self.n_ctx})" if self.n_ctx else ""))
        parts = [
            f"TTFT {ttft}",
            phase("prefill", self.prefill_tokens, self.prefill_tok_s, 0),
            f"cached {cached}",
            decode,
            kv,
            f"total {self.total_s:.2f} s",
            f"stop: {self.stop_reason}",
        ]
        if self.dropped_messages:
            parts.append(f"dropped {self.dropped_messages} msgs ({self.dropped_tokens} tok)")
        if remote:
            parts.append(f"on {self.source}")
        return " · ".join(parts)
