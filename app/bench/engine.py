"""Benchmarks that print figures; speed targets live here, not in timed tests.

Everything is compared inside one run (alternating rounds, medians), because
absolute tok/s on a shared machine swing from minute to minute.
"""

from __future__ import annotations

import ctypes
import statistics
import time

import llama_cpp

from app.engine.decoder import Decoder
from app.engine.events import TextDelta
from app.engine.loader import LoadedModel, LoadOptions, load_model
from app.engine.models import resolve_model
from app.engine.sampling import GenerationSettings

PROMPT = "User: Write a long story about a dragon who learns to paint.\nAssistant:"
LONG_TEXT = (
    "The history of the lighthouse keepers of the northern coast is a story of patience, "
    "weather and small routines repeated for decades. "
)


def _raw_decode(model: LoadedModel, prompt: list[int], n: int) -> dict:
    """The minimal llama-cpp-python loop: decode, greedy sample, detokenize."""
    ctx = model.llm.ctx
    vocab = llama_cpp.llama_model_get_vocab(model.llm.model)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    batch = llama_cpp.llama_batch_init(max(len(prompt), 1), 0, 1)
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
    buf = ctypes.create_string_buffer(256)
    try:
        t0 = time.perf_counter()
        for i, t in enumerate(prompt):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, i, 1, 0
            batch.seq_id[i][0] = 0
        batch.logits[len(prompt) - 1] = 1
        batch.n_tokens = len(prompt)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("raw prefill failed")
        llama_cpp.llama_synchronize(ctx)
        t_pre = time.perf_counter()
        pos = len(prompt)
        out = bytearray()
        t_first = t_last = None
        for k in range(n):
            tok = llama_cpp.llama_sampler_sample(chain, ctx, -1)
            m = llama_cpp.llama_token_to_piece(vocab, tok, buf, 256, 0, False)
            out += buf.raw[:m]
            t_last = time.perf_counter()
            t_first = t_first or t_last
            if k == n - 1:
                break
            batch.token[0], batch.pos[0], batch.n_seq_id[0], batch.logits[0] = tok, pos, 1, 1
            batch.seq_id[0][0] = 0
            batch.n_tokens = 1
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("raw decode failed")
            pos += 1
        return {"ttft_s": t_first - t0, "prefill_tok_s": len(prompt) / (t_pre - t0),
                "decode_tok_s": (n - 1) / (t_last - t_first)}
    finally:
        llama_cpp.llama_sampler_free(chain)
        llama_cpp.llama_batch_free(batch)


def _engine_decode(dec: Decoder, prompt: list[int], n: int) -> dict:
    """The engine's streaming path, timed as a consumer of its events sees it."""
    dec.reset()
    deltas: list[TextDelta] = []
    t0 = time.perf_counter()
    # Greedy without penalty: exactly the raw loop's sampling, so only the
    # engine's own per-token work differs.
    greedy = GenerationSettings(max_tokens=n, temperature=0, repeat_penalty=1.0, ignore_eos=True)
    done = dec.generate(prompt, greedy,
                        on_event=lambda e: deltas.append(e) if isinstance(e, TextDelta) else None)
    first, last = deltas[0], deltas[-1]
    st = done.stats
    return {"ttft_s": first.t - t0, "prefill_tok_s": st.prefill_tok_s,
            "decode_tok_s": (last.generated - first.generated) / (last.t - first.t)}


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _reuse(dec: Decoder, rounds: int) -> dict:
    """TTFT of a short turn after a long cached prefix vs the same tokens alone."""
    long_prompt = dec.tokenize("User: " + LONG_TEXT * 60 + "\nSummarize.\nAssistant:")
    long_prompt = long_prompt[: min(len(long_prompt), dec.n_ctx - 200)]
    suffix = dec.tokenize("\nUser: Now tell me why lighthouses are painted in stripes.\nAssistant:",
                          add_bos=False)
    greedy = GenerationSettings(max_tokens=4, temperature=0, ignore_eos=True)
    with_cache, alone, cached = [], [], 0
    for _ in range(rounds):
        dec.reset()
        dec.generate(long_prompt, greedy)
        t0 = time.perf_counter()
        # Extend exactly what the cache holds, so only the suffix is new.
        r = dec.generate(dec.tokens + suffix, GenerationSettings(max_tokens=2, temperature=0,
                                                                   ignore_eos=True))
        with_cache.append(r.stats.ttft_s or (time.perf_counter() - t0))
        cached = r.stats.cached_tokens
        dec.reset()
        r2 = dec.generate(list(suffix), GenerationSettings(max_tokens=2, temperature=0, ignore_eos=True))
        alone.append(r2.stats.ttft_s)
    return {"reuse_prefix_tokens": cached, "reuse_new_tokens": len(suffix),
            "reuse_ttft_s": statistics.median(with_cache), "alone_ttft_s": statistics.median(alone),
            "reuse_ttft_ratio": statistics.median(with_cache) / statistics.median(alone)}


def _utilization(model: LoadedModel, position: int, decode_tok_s: float, measure: bool = True) -> dict:
    """How close the decode ran to both roofs at the run's middle position: bytes a step reads
    against the probed bandwidth, MACs a token costs against the kernels' probed MAC rate
    (app.engine.utilization, app.engine.compute_peak); the lower roof binds."""
    from app.engine.utilization import limits_for, token_bytes

    tb = token_bytes(model.header, position, model.options.kv_type)
    limits = limits_for(model, compute=measure)
    if limits is None:
        return {"bytes_per_token": tb.total, "peak_source": "not measured (a partial GPU offload, or a GPU "
                                                             "NVML cannot read)"}
    peak, source = limits.peak, limits.source
    r = limits.roofs(position, decode_tok_s)
    return {"bytes_per_token": tb.total, "weight_bytes_per_token": tb.weights, "kv_bytes_per_token": tb.kv,
            "peak_read_gbs": peak / 1e9, "peak_source": source,
            "achieved_read_gbs": decode_tok_s * tb.total / 1e9,
            "decode_bw_utilization": decode_tok_s * tb.total / peak,
            "decode_ceiling_tok_s": peak / tb.total,  # the memory roof, as before the compute one
            "macs_per_token": r.macs_per_token,
            "peak_gmac_s": limits.mac_peak / 1e9 if limits.mac_peak else None,
            "compute_peak_source": limits.mac_source or "not measured",
            "achieved_gmac_s": decode_tok_s * r.macs_per_token / 1e9,
            "memory_roof_tok_s": r.memory_tok_s, "compute_roof_tok_s": r.compute_tok_s,
            "memory_utilization": r.memory_util, "compute_utilization": r.compute_util,
            "binding_roof": r.binds, "roofline_ceiling_tok_s": r.ceiling_tok_s}


def _profile(model: LoadedModel, rounds: int) -> dict:
    """Where one decoded token's time goes (app.engine.token_profile), or why there is no split."""
    from app.engine.token_profile import profile_token

    if model.report.layers_offloaded:
        return {"token_profile": "not measured (layers on a GPU: the split times the CPU's steps)"}
    # One thread against the model's count; a model on one thread is profiled alone, since a
    # second thread's spinning on a busy machine would time the machine, not the token.
    other = 1 if model.report.n_threads > 1 else 0
    return {"token_profile": profile_token(model, rounds=max(3, rounds), other=other).as_dict()}


def where_it_ran(report) -> dict:
    """The backend, layers on the GPU of the layers there are, the devices llama.cpp
    registered, each with its memory, and whether AMX ran (and the weights repacked): which
    device and kernels `bench`'s figures are from."""
    return {"backend": report.backend, "layers_offloaded": report.layers_offloaded,
            "layers_total": report.layers_total,
            "devices": list(report.devices), "amx": report.amx,
            "repacked_mib": {k: round(v / 2**20) for k, v in report.repacked.items()}}


def run_engine_bench(model_path, opts: LoadOptions, tokens: int = 256, rounds: int = 5,
                     reuse: bool = True, profile: bool = True) -> dict:
    """`profile` False: no token profile (and no compute probe where none was measured)."""
    opts.n_ctx = max(opts.n_ctx, 2048)
    from app.engine.utilization import peak_for

    peak_for(opts.threads(), remeasure=True)  # before the model's threads exist to share the cores
    model = load_model(resolve_model(model_path), opts)
    dec = Decoder(model)
    try:
        prompt = dec.tokenize(PROMPT)
        _engine_decode(dec, prompt, 16)  # warm caches and page in the weights
        eng, raw = [], []
        for _ in range(rounds):
            eng.append(_engine_decode(dec, prompt, tokens))
            raw.append(_raw_decode(model, prompt, tokens))
        dec.reset()
        result = {
            "model": model.report.model_path,
            "runs_on": model.report.runs_on,
            **where_it_ran(model.report),
            "threads": model.report.n_threads,
            "tokens": tokens,
            "rounds": rounds,
            "engine_ttft_s": _median(eng, "ttft_s"),
            "engine_prefill_tok_s": _median(eng, "prefill_tok_s"),
            "engine_decode_tok_s": _median(eng, "decode_tok_s"),
            "raw_ttft_s": _median(raw, "ttft_s"),
            "raw_prefill_tok_s": _median(raw, "prefill_tok_s"),
            "raw_decode_tok_s": _median(raw, "decode_tok_s"),
            # Per-round ratios cancel the machine's drift between rounds.
            "decode_ratio": statistics.median(e["decode_tok_s"] / r["decode_tok_s"]
                                              for e, r in zip(eng, raw)),
        }
        result.update(_utilization(model, len(prompt) + tokens // 2, result["engine_decode_tok_s"], profile))
        if profile:
            result.update(_profile(model, rounds))
        if reuse:
            result.update(_reuse(dec, max(3, rounds // 2)))
        return result
    finally:
        dec.close()
        model.close()
