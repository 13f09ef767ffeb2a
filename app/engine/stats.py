"""The one measured record per reply.

The same record feeds the gauges, the store and the exports, so a number a
user sees in the window is the number in the transcript and in `ask --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass
class ReplyStats:
    ttft_s: float | None  # request submitted -> first visible text (None: no text)
    prefill_tokens: int  # prompt tokens evaluated for this reply
    cached_tokens: int  # prompt tokens reused from the KV cache
    prefill_s: float  # llama.cpp compute time of the prefill
    prefill_tok_s: float | None
    decode_tokens: int  # tokens generated
    decode_s: float  # llama.cpp compute time of the decode steps
    decode_tok_s: float | None  # llama.cpp's own decode rate
    total_s: float  # wall clock, request submitted -> reply complete
    kv_used: int  # cells of the KV cache in use after the reply
    n_ctx: int
    stop_reason: str  # stop / length / cancelled / error
    prompt_tokens: int = 0  # cached + prefilled
    wall_decode_tok_s: float | None = None  # the rate as the reader saw it
    dropped_messages: int = 0  # history turns left out to fit the context
    dropped_tokens: int = 0
    error: str | None = None
    # Of cached_tokens, how many were loaded from the prompt cache on disk for
    # this reply; the rest were still in this run's memory.
    cached_disk_tokens: int = 0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> ReplyStats:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def summary(self) -> str:
        """The one-line footer shown under a message and on the CLI's stderr."""
        ttft = f"{self.ttft_s * 1000:.0f} ms" if self.ttft_s is not None else "-"
        pre = f"{self.prefill_tok_s:.0f}" if self.prefill_tok_s else "-"
        dec = f"{self.decode_tok_s:.1f}" if self.decode_tok_s else "-"
        parts = [
            f"TTFT {ttft}",
            f"prefill {self.prefill_tokens} tok @ {pre} tok/s",
            f"cached {self.cached_tokens}"
            + (f" ({self.cached_disk_tokens} from disk)" if self.cached_disk_tokens else ""),
            f"decode {self.decode_tokens} tok @ {dec} tok/s",
            f"KV {self.kv_used}/{self.n_ctx}",
            f"total {self.total_s:.2f} s",
            f"stop: {self.stop_reason}",
        ]
        if self.dropped_messages:
            parts.append(f"dropped {self.dropped_messages} msgs ({self.dropped_tokens} tok)")
        return " · ".join(parts)
