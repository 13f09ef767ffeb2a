"""Real failures on demand: llama.cpp's own decode call made to fail after N good calls.

llama_decode returns non-zero when it cannot go on (a full KV cache, a backend
error); these helpers make the real function return that code at a chosen
step, so the code paths that handle it run against the real model.
"""

from __future__ import annotations

import llama_cpp


def failing_decode_after(monkeypatch, good_calls: int, code: int = -1) -> list[int]:
    """Let `good_calls` llama_decode calls through, then fail every later one with `code`.
    Returns a one-item list counting the calls, for assertions."""
    real = llama_cpp.llama_decode
    calls = [0]

    def decode(ctx, batch):
        calls[0] += 1
        return real(ctx, batch) if calls[0] <= good_calls else code

    monkeypatch.setattr(llama_cpp, "llama_decode", decode)
    return calls
