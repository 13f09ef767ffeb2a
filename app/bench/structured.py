"""`llamadesk bench --structured`: replies held to JSON schemas, LLGuidance against llama.cpp's GBNF.

For every schema of app.bench.structured_set, in one run on the bundled
model, greedy, alternating per schema:
- LlamaDesk's path (LLGuidance, the sampler's draw checked and only a refused
  one masked): each reply validated with the `jsonschema` package (formats
  checked), its decode rate against the same prompt decoded free to the same
  length, its grammar time per token, its compile time;
- llama.cpp's own (llama-cpp-python's JSON-schema-to-GBNF converter and
  llama.cpp's grammar sampler applied to every candidate, as its
  "grammar first" path does): the same figures;
- for both, the full token mask's cost at each step of the reply, replayed
  on its own tokens, which is what a mask costs when every token needs one
  (JSONSchemaBench's MaskBench measures this).
"""

from __future__ import annotations

import ctypes
import json
import statistics
import time

import llama_cpp
import numpy as np

from app.bench.structured_set import CASES
from app.chat.local_engine import LocalChatEngine
from app.engine import batch_fill
from app.engine.grammar import Constraint, GrammarError, GrammarMatcher, compile_grammar
from app.engine.loader import LoadOptions
from app.engine.message import MessageBody
from app.engine.sampling import GenerationSettings
from app.engine.vocabulary import tokenizer_for

MAX_TOKENS = 120
TARGETS = {"mask_p50_ms": 0.5, "mask_p99_ms": 2.0, "decode_ratio": 0.9, "compile_ms": 50.0,
           "valid_pct": 100.0}


def _suffix(prompt: str) -> str:
    return prompt + " Answer in JSON."


def _validator(schema: dict):
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _valid(text: str, schema: dict) -> bool:
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return not list(_validator(schema).iter_errors(doc))


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


class _GbnfRun:
    """llama.cpp's grammar sampler over every candidate of each step, greedy, on the engine's own
    context (the decoder's KV cache is reset first): the reference the issue compares with."""

    def __init__(self, engine: LocalChatEngine):
        self.dec = engine.decoder
        self.vocab = self.dec.vocab
        self.n = self.dec.n_vocab
        self.cands = (llama_cpp.llama_token_data * self.n)()
        self.view = np.ctypeslib.as_array(self.cands)
        self.ids = np.arange(self.n, dtype=np.int32)
        self.batch = llama_cpp.llama_batch_init(self.dec.n_batch, 0, 1)

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)

    def _decode(self, toks: list[int], pos0: int) -> None:
        batch_fill.fill(self.batch, toks, pos0)
        if llama_cpp.llama_decode(self.dec.ctx, self.batch) != 0:
            raise RuntimeError("llama_decode failed in the GBNF run")

    def compile(self, schema: dict):
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        t = time.perf_counter()
        gbnf = json_schema_to_gbnf(json.dumps(schema))
        smpl = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        return smpl, (time.perf_counter() - t) * 1000

    def _apply(self, smpl, row) -> tuple[np.ndarray, float]:
        self.view["id"], self.view["logit"], self.view["p"] = self.ids, row, 0.0
        cur = llama_cpp.llama_token_data_array(self.cands, self.n, -1, False)
        t = time.perf_counter()
        llama_cpp.llama_sampler_apply(smpl, ctypes.byref(cur))
        return self.view[: cur.size], (time.perf_counter() - t) * 1000

    def reply(self, prompt: list[int], schema: dict) -> dict:
        smpl, compile_ms = self.compile(schema)
        dec = self.dec
        dec.reset()
        masks, toks = [], []
        try:
            for start in range(0, len(prompt), dec.n_batch):
                self._decode(prompt[start:start + dec.n_batch], start)
            pos = len(prompt)
            t0 = time.perf_counter()
            for _ in range(MAX_TOKENS):
                row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(dec.ctx, -1), shape=(self.n,))
                cand, ms = self._apply(smpl, row)
                masks.append(ms)
                tok = int(cand["id"][int(np.argmax(cand["logit"]))])
                if llama_cpp.llama_vocab_is_eog(self.vocab, tok):
                    break
                llama_cpp.llama_sampler_accept(smpl, tok)
                toks.append(tok)
                self._decode([tok], pos)
                pos += 1
            wall = time.perf_counter() - t0
        finally:
            llama_cpp.llama_sampler_free(smpl)
            dec.reset()
        text = dec.model.llm.detokenize(toks).decode("utf-8", "replace")
        return {"text": text, "tokens": len(toks), "tok_s": len(toks) / wall if wall > 0 and toks else None,
                "compile_ms": compile_ms, "masks_ms": masks}

    def replay_masks(self, schema: dict, toks: list[int]) -> list[float]:
        """The GBNF mask's cost along another reply's tokens (stops where the grammar refuses one)."""
        smpl, _ = self.compile(schema)
        rng = np.zeros(self.n, dtype=np.float32)
        out = []
        try:
            for tok in toks:
                cand, ms = self._apply(smpl, rng)
                out.append(ms)
                if not np.isfinite(cand["logit"][cand["id"] == tok]).any():
                    break
                llama_cpp.llama_sampler_accept(smpl, tok)
        finally:
            llama_cpp.llama_sampler_free(smpl)
        return out


def _llguidance_masks(c: Constraint, vocab, n_vocab: int, toks: list[int]) -> list[float]:
    """The full LLGuidance mask's cost along the reply's own tokens."""
    g = GrammarMatcher(c, vocab, n_vocab)
    mask = np.zeros((n_vocab + 31) // 32, dtype=np.int32)
    out = []
    for tok in toks:
        t = time.perf_counter()
        g.matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
        out.append((time.perf_counter() - t) * 1000)
        if not g.matcher.consume_token(tok):
            break
    return out


def run_structured_bench(model_path, opts: LoadOptions, cases=CASES) -> dict:
    engine = LocalChatEngine.open(model_path, opts, prompt_cache=False)
    try:
        vocab, n_vocab = engine.decoder.vocab, engine.decoder.n_vocab
        t = time.perf_counter()
        tokenizer_for(vocab)
        tokenizer_s = time.perf_counter() - t
        gbnf = _GbnfRun(engine)
        try:
            rows = [_case(engine, gbnf, name, _suffix(prompt), schema, vocab, n_vocab)
                    for name, prompt, schema in cases]
        finally:
            gbnf.close()
        return _summary(rows, tokenizer_s, engine.model.header.path.name)
    finally:
        engine.close()


def _case(engine: LocalChatEngine, gbnf: _GbnfRun, name: str, prompt: str, schema: dict, vocab,
          n_vocab: int) -> dict:
    from llguidance import LLMatcher

    c = Constraint.json_schema(schema)
    row: dict = {"schema": name}
    try:
        t = time.perf_counter()
        LLMatcher(tokenizer_for(vocab), compile_grammar(c), log_level=0)
        row["compile_ms"] = (time.perf_counter() - t) * 1000
    except GrammarError as e:
        row["refused"] = str(e)
        return row
    engine.decoder.reset()
    r = engine.reply([], prompt, GenerationSettings(max_tokens=MAX_TOKENS, temperature=0, constraint=c))
    engine.decoder.reset()
    n = max(2, r.stats.decode_tokens or 2)
    free = engine.reply([], prompt, GenerationSettings(max_tokens=n, temperature=0, ignore_eos=True))
    toks = engine.model.llm.tokenize(r.text.encode(), add_bos=False, special=False)
    row.update(valid=_valid(r.text, schema), text=r.text, tokens=r.stats.decode_tokens,
               stop=r.stats.stop_reason, grammar_ms_per_token=r.stats.grammar_ms_per_token,
               decode_tok_s=r.stats.decode_tok_s, free_tok_s=free.stats.decode_tok_s,
               masks_ms=_llguidance_masks(c, vocab, n_vocab, toks))
    g = gbnf.reply(engine.prompt_tokens([MessageBody("user", prompt)]), schema)
    row["gbnf"] = {"valid": _valid(g["text"], schema), "compile_ms": g["compile_ms"], "tokens": g["tokens"],
                   "tok_s": g["tok_s"], "masks_ms": gbnf.replay_masks(schema, toks) or g["masks_ms"]}
    return row


def _summary(rows: list[dict], tokenizer_s: float, model: str) -> dict:
    ran = [r for r in rows if "refused" not in r]
    masks = [m for r in ran for m in r["masks_ms"]]
    lazy = [r["grammar_ms_per_token"] for r in ran if r.get("grammar_ms_per_token") is not None]
    ratios = [r["decode_tok_s"] / r["free_tok_s"] for r in ran
              if r.get("decode_tok_s") and r.get("free_tok_s")]
    g_masks = [m for r in ran for m in r["gbnf"]["masks_ms"]]
    g_ratios = [r["gbnf"]["tok_s"] / r["free_tok_s"] for r in ran
                if r["gbnf"]["tok_s"] and r.get("free_tok_s")]

    def side(valid, compile_ms, mask, ratio) -> dict:
        return {"valid_pct": 100.0 * sum(valid) / len(valid) if valid else None,
                "mask_p50_ms": _pct(mask, 0.5), "mask_p99_ms": _pct(mask, 0.99),
                "compile_ms_p50": _pct(compile_ms, 0.5), "compile_ms_max": max(compile_ms, default=None),
                "decode_ratio_median": statistics.median(ratio) if ratio else None}

    ours = side([r["valid"] for r in ran], [r["compile_ms"] for r in ran], masks, ratios)
    ours["grammar_ms_per_token_p50"] = _pct(lazy, 0.5)
    ours["grammar_ms_per_token_p99"] = _pct(lazy, 0.99)
    theirs = side([r["gbnf"]["valid"] for r in ran], [r["gbnf"]["compile_ms"] for r in ran], g_masks,
                  g_ratios)
    return {"model": model, "schemas": len(rows), "refused": [r["schema"] for r in rows if "refused" in r],
            "tokenizer_build_s": tokenizer_s, "llguidance": ours, "gbnf": theirs, "targets": TARGETS,
            "invalid": [{"schema": r["schema"], "text": r["text"], "stop": r["stop"]}
                        for r in ran if not r["valid"]],
            "per_schema": [_row_figures(r) for r in rows]}


def _row_figures(r: dict) -> dict:
    """One schema's figures without the per-token lists."""
    out = {k: v for k, v in r.items() if k not in ("masks_ms", "text", "gbnf")}
    if "gbnf" in r:
        out["gbnf"] = {k: v for k, v in r["gbnf"].items() if k != "masks_ms"}
    return out
