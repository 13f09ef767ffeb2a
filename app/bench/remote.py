"""`llamadesk bench --endpoint URL`: a remote server as LlamaDesk sees it, against its own figures.

Where the server reports timings (llama-server), each client-side figure is
put beside the server's for the same request, so the ratios say what the
network, HTTP and LlamaDesk's own parsing cost: wall decode rate over the
server's predicted_per_second, client TTFT over the server's prefill (the
pass that yields the first token). Then 1, 4 and 8 requests at once: the server's batching,
as aggregate tok/s.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from app.chat.remote_engine import RemoteChatEngine
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.remote.endpoint import Endpoint
from app.remote.errors import RemoteError

PROMPT = "Write a long story about a dragon who learns to paint."
CONCURRENCY = (1, 4, 8)


def _greedy(tokens: int) -> GenerationSettings:
    """Greedy, exactly `tokens` long, no repeat penalty: llama-server's penalty sampler costs
    more per slot as slots are added, which would measure the sampler, not the batching."""
    return GenerationSettings(max_tokens=tokens, temperature=0, ignore_eos=True, repeat_penalty=1.0)


def _med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _measured(eng: RemoteChatEngine, prompt: str, tokens: int):
    """One reply's stats, or RemoteError: a benchmark of replies that failed, or that carried
    no text, would report success with every figure empty."""
    st = eng.reply([], prompt, _greedy(tokens)).stats
    if st.error is not None:
        raise RemoteError(eng.endpoint.base_url, f"the benchmark's reply failed: {st.error}")
    if st.ttft_s is None:
        raise RemoteError(eng.endpoint.base_url, "the server answered the benchmark's request with no text")
    return st


def _single(eng: RemoteChatEngine, tokens: int, rounds: int) -> dict:
    rows = []
    for i in range(rounds):
        # A different first word each round: no round reuses another's cached prompt.
        rows.append(_measured(eng, f"{i}. {PROMPT}", tokens))
    out = {"ttft_s": _med([s.ttft_s for s in rows]),
           "wall_decode_tok_s": _med([s.wall_decode_tok_s for s in rows]),
           "server_decode_tok_s": _med([s.decode_tok_s for s in rows]),
           "server_prefill_s": _med([s.prefill_s for s in rows]),
           "decode_tokens": _med([s.decode_tokens for s in rows])}
    pairs = [(s.wall_decode_tok_s, s.decode_tok_s) for s in rows if s.wall_decode_tok_s and s.decode_tok_s]
    out["client_decode_ratio"] = _med([w / d for w, d in pairs]) if pairs else None
    # The server's own TTFT is its prefill: that pass yields the first token.
    ttfts = [(s.ttft_s, s.prefill_s) for s in rows if s.ttft_s and s.prefill_s]
    out["ttft_vs_server"] = _med([c / srv for c, srv in ttfts]) if ttfts else None
    return out


def _concurrent(eng: RemoteChatEngine, n: int, tokens: int) -> dict:
    prompts = [f"Request {n}-{i}: {PROMPT}" for i in range(max(n, 2) * 2)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        stats = list(pool.map(lambda p: eng.reply([], p, _greedy(tokens)).stats, prompts))
    wall = time.perf_counter() - t0
    generated = sum(s.decode_tokens or 0 for s in stats)
    errors = [s.error for s in stats if s.error]
    return {"requests": len(prompts), "aggregate_tok_s": generated / wall if generated else None,
            "median_ttft_s": _med([s.ttft_s for s in stats]), "errors": len(errors)}


def _long_prompt_ttft(eng: RemoteChatEngine, rounds: int = 2) -> dict:
    """TTFT where it matters, a long prompt: the client's against the server's prefill time."""
    pairs = []
    for i in range(rounds):
        text = f"Text {i}: " + "The lighthouse keepers kept their logbooks for decades. " * 120
        st = eng.reply([], text + "\nSummarize.", _greedy(2)).stats
        if st.ttft_s and st.prefill_s:
            pairs.append((st.ttft_s, st.prefill_s, st.prefill_tokens))
    if not pairs:
        return {"long_prompt_ttft_vs_server": None}
    return {"long_prompt_tokens": pairs[-1][2], "long_prompt_ttft_s": _med([c for c, _, _ in pairs]),
            "long_prompt_server_prefill_s": _med([p for _, p, _ in pairs]),
            "long_prompt_ttft_vs_server": _med([c / p for c, p, _ in pairs])}


def _second_turn(eng: RemoteChatEngine) -> int | None:
    q = "Tell me about lighthouses in two sentences."
    first = eng.reply([], q, _greedy(24))
    history = [MessageBody("user", q), MessageBody("assistant", first.text)]
    second = eng.reply(history, "Why are they striped?", _greedy(8))
    return second.stats.cached_tokens


def run_remote_bench(endpoint: Endpoint, model: str | None, prompt_format: str, tokens: int,
                     rounds: int) -> dict:
    eng = RemoteChatEngine(endpoint, model, prompt_format=prompt_format)
    try:
        _measured(eng, "Warm up.", 4)
        result = {"server": eng.info.kind, "version": eng.info.version, "base_url": endpoint.base_url,
                  "model": eng.remote_model.id, "n_ctx": eng.n_ctx, "tokens": tokens, "rounds": rounds}
        result.update(_single(eng, tokens, rounds))
        result.update(_long_prompt_ttft(eng))
        levels = {str(n): _concurrent(eng, n, tokens) for n in CONCURRENCY}
        result["concurrency"] = levels
        base = levels["1"]["aggregate_tok_s"]
        top = levels[str(CONCURRENCY[-1])]["aggregate_tok_s"]
        result["parallel_speedup"] = top / base if base and top else None
        result["second_turn_cached_tokens"] = _second_turn(eng)
        return result
    finally:
        eng.close()
