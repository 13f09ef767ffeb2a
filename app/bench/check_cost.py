"""What a speculative check costs against a plain step, and how much of it is the output matrix.

A check evaluates the token just sampled and k guesses in one pass, and needs every row's
logits; each row then pays the vocabulary-wide output matrix. Timing the same rows with the
last row's logits only separates that part from the layers' (`bench --speculative`, `bench
--kernels`).
"""

from __future__ import annotations

import statistics
import time

import llama_cpp

from app.engine import batch_fill
from app.engine.loader import LoadedModel

PREFIX = 200  # tokens in the cache before each check, as after a short prompt


def median_ms(fn, rounds: int) -> float:
    """The median milliseconds of `fn()` over `rounds` runs."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def check_cost(model: LoadedModel, tokens: list[int], rows: int = 9, rounds: int = 7) -> dict:
    """Milliseconds of a one-token step and of a `rows`-row check with every row's logits and
    with the last row's only, on a context of the model's own shape; `tokens` (at least
    PREFIX + rows of them) are the text evaluated."""
    p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
    p.n_ctx, p.n_seq_max, p.no_perf = 1024, 1, True
    ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
    if not ctx:
        raise RuntimeError("could not create a context to time checks in")
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(max(PREFIX, rows), 0, 1)

    def run(n: int, every_row: bool):
        def once() -> None:
            batch_fill.fill(batch, tokens[PREFIX:PREFIX + n], PREFIX, every_row=every_row)
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed timing a check")
            llama_cpp.llama_memory_seq_rm(mem, 0, PREFIX, -1)
        return once

    try:
        batch_fill.fill(batch, tokens[:PREFIX], 0)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed reading the prefix")
        run(rows, True)()  # warm
        step = median_ms(run(1, True), rounds)
        every = median_ms(run(rows, True), rounds)
        last = median_ms(run(rows, False), rounds)
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)
    return {"rows": rows, "step_ms": round(step, 2), "check_ms": round(every, 2),
            "check_last_logits_ms": round(last, 2), "check_in_steps": round(every / step, 2),
            "output_rows_share": round((every - last) / every, 3) if every else None}
