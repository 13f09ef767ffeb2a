"""One llama.cpp build's CPU figures, measured in this process through the engine's own calls.

`bench --kernels` runs this module once per build (each loads its own library, chosen before
llama_cpp is imported), so the builds are compared by the same code on the same prompts:

    python -m app.bench.kernel_figures MODEL [--gpu-layers 0]   prints one JSON object
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import app.engine  # noqa: F401  (first: it chooses the llama.cpp library before llama_cpp loads it)

ROUNDS = 3
CHECK_ROWS = 9  # a check of 8 guesses and the token before them


def _timed(fn, rounds: int = ROUNDS) -> float:
    from app.bench.check_cost import median_ms  # imports llama_cpp: after app.engine, above

    return median_ms(fn, rounds) / 1000


def measure(model_path: str) -> dict:
    import llama_cpp  # after app.engine (imported above), which chooses the library it loads

    from app.bench.check_cost import check_cost
    from app.engine import backend, batch_fill
    from app.engine.decoder import Decoder
    from app.engine.loader import LoadOptions, load_model
    from app.engine.sampling import GenerationSettings

    model = load_model(model_path, LoadOptions(n_ctx=4096, n_gpu_layers=0, n_threads=2, n_ubatch=512))
    dec = Decoder(model)
    ctx = model.llm.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    words = dec.tokenize(" ".join(f"word{i % 97} is number {i}." for i in range(400)), add_bos=False)

    def clear() -> None:
        llama_cpp.llama_memory_clear(mem, True)

    def decode(tokens, pos0: int, every_row: bool = False) -> None:
        batch_fill.fill(batch, tokens, pos0, every_row=every_row)
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def threads(n: int) -> None:
        llama_cpp.llama_set_n_threads(ctx, n, n)

    def prefill_512() -> None:
        clear()
        decode(words[:512], 0)

    def decode_128() -> None:
        clear()
        decode(words[:16], 0)
        for i in range(128):
            decode([words[16 + i]], 16 + i)

    out: dict = {"library": str(backend.library_dir()), "amx": backend.amx().line(),
                 "repacked_mib": {k: round(v / 2**20) for k, v in model.report.repacked.items()}}
    try:
        threads(2)
        prefill_512()  # pages the weights in
        out["pp512_tok_s"] = 512 / _timed(prefill_512)
        for n in (1, 2):
            threads(n)
            out[f"tg128_t{n}_tok_s"] = 128 / _timed(decode_128, 2)
        threads(2)
        cost = check_cost(model, words, CHECK_ROWS)
        out["check9_all_logits_ms"] = cost["check_ms"]
        out["check9_last_logits_ms"] = cost["check_last_logits_ms"]
        out["step1_ms"] = cost["step_ms"]
        long_prompt = (words * 6)[:2000]

        def ttft() -> float:
            dec.reset()
            r = dec.generate(long_prompt, GenerationSettings(max_tokens=1, temperature=0, ignore_eos=True))
            return r.stats.ttft_s
        out["ttft_2000_s"] = statistics.median(ttft() for _ in range(2))
        out["batch32x64_tok_s"] = _batched(model, words)
    finally:
        llama_cpp.llama_batch_free(batch)
        dec.close()
        model.close()
    return out


def _batched(model, words: list[int], seqs: int = 32, tokens: int = 64, prompt: int = 16) -> float:
    """Tokens a second decoding `seqs` sequences together, one token each a step, after a short
    prompt each (llama-batched-bench's S_TG)."""
    import llama_cpp

    p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
    p.n_ctx = seqs * (prompt + tokens + 8)
    p.n_seq_max = seqs
    p.n_batch = p.n_ubatch = max(512, seqs)
    p.n_threads = p.n_threads_batch = 2
    p.kv_unified = True
    ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
    batch = llama_cpp.llama_batch_init(seqs * prompt, 0, 1)

    def put(i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
        batch.seq_id[i][0], batch.logits[i] = seq, logits

    try:
        for s in range(seqs):
            for j in range(prompt):
                put(s * prompt + j, words[(s + j) % len(words)], j, s, j == prompt - 1)
        batch.n_tokens = seqs * prompt
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed (batched prompts)")
        t0 = time.perf_counter()
        for step in range(tokens):
            for s in range(seqs):
                put(s, words[(s * 7 + step) % len(words)], prompt + step, s, True)
            batch.n_tokens = seqs
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed (batched step)")
        return seqs * tokens / (time.perf_counter() - t0)
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_free(ctx)


if __name__ == "__main__":
    json.dump(measure(sys.argv[1]), sys.stdout)
    sys.stdout.write("\n")
