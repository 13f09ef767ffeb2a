"""The compute roof: multiply-adds a second this machine's llama.cpp kernels deliver.

A figure from a datasheet or a numpy matmul would not be the kernels a token runs
through (quantized dot products, AMX tiles or not, this thread count), so the peak
is measured on the loaded model itself: one batch of PROBE_TOKENS tokens in a
scratch context, logits for the last only, whose weights are read once for all of
them, so the step is as compute-bound as llama.cpp gets. Its MACs (the layers'
matmuls for every token, attention over the causal positions, one row of logits)
over the best time of a few rounds is the peak. It is a property of the machine
and the build, so it is kept in the cache folder per CPU, thread count, library
folder and AMX state (AMX changes the kernels), as the bandwidth probe is.
"""

from __future__ import annotations

import time

import llama_cpp

from app.engine import backend, batch_fill, machine_figures
from app.engine.macs import batch_macs

PROBE_TOKENS = 512
ROUNDS = 3
CACHE_NAME = "compute_peak.json"

_PEAKS: dict[str, tuple[float, str]] = {}  # this process's figures: one probe per key


def key(threads: int) -> str:
    return (f"{machine_figures.machine_key(threads)}|"
            f"{backend.library_dir()}|amx={'on' if backend.amx().on else 'off'}")


def probe_compute(model, threads: int, tokens: int, rounds: int) -> float:
    """MAC/s of the best of `rounds` batches of `tokens` tokens through `model` in a scratch
    context of its own (the chat's context and cache are not touched)."""
    p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
    p.n_ctx = p.n_batch = p.n_ubatch = tokens
    p.n_seq_max = 1
    p.n_threads = p.n_threads_batch = threads
    p.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
    if not ctx:
        raise RuntimeError(f"could not create a {tokens}-token context for the compute probe")
    batch = llama_cpp.llama_batch_init(tokens, 0, 1)
    try:
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model.llm.model))
        ids = [(1000 + 7919 * i) % n_vocab for i in range(tokens)]  # varied ordinary tokens
        best = float("inf")
        for _ in range(rounds):
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
            batch_fill.fill(batch, ids, 0)
            t0 = time.perf_counter()
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed in the compute probe")
            llama_cpp.llama_synchronize(ctx)
            best = min(best, time.perf_counter() - t0)
        return batch_macs(model.header, tokens) / best
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


def compute_peak(model, measure: bool = True, remeasure: bool = False) -> tuple[float, str] | None:
    """(MAC/s, where the figure comes from) at the model's decode threads: this process's
    figure, else the cache's, else (`measure`) a probe kept in both; None when there is none."""
    threads = model.report.n_threads
    k = key(threads)
    if k in _PEAKS and not remeasure:
        return _PEAKS[k]
    what = f"prefill probe: {PROBE_TOKENS} tokens, {threads} thread" + ("" if threads == 1 else "s")
    known = None if remeasure else machine_figures.read(CACHE_NAME, k)
    if known is not None:
        _PEAKS[k] = known, f"{what}, measured earlier"
        return _PEAKS[k]
    if not measure:
        return None
    mac_s = probe_compute(model, threads, PROBE_TOKENS, ROUNDS)
    mac_s = machine_figures.keep(CACHE_NAME, k, mac_s)
    _PEAKS[k] = mac_s, what
    return _PEAKS[k]
