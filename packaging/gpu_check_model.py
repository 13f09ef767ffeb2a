"""Writes a Llama-architecture GGUF with random Q4_K weights, for packaging/gpu-check.sh.

The device machine can download nothing and the bundled model is too big to
carry, so the check makes its own. Decode speed depends on the tensor shapes
and quantization, not on the weights' values; the shapes here are Llama 3.2
1B's (the `1b` size) or a small one for the CPU rehearsal. The weights are
random but finite (fixed block scales), so logits stay numbers and greedy
sampling never meets NaN. Written with the gguf-py package vendored in the
same llama-cpp-python sdist the check builds, so the format matches the engine.

    python gpu_check_model.py OUT.gguf --size 1b|small [--gguf-py DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

SIZES = {
    # n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab
    "1b": (2048, 16, 32, 8, 8192, 128256),
    "small": (512, 4, 8, 4, 1536, 32000),
}
BLOCK, BLOCK_BYTES = 256, 144  # Q4_K: d, dmin (f16), 12 scale bytes, 128 bytes of 4-bit quants


def _q4k(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Random Q4_K rows; d and dmin fixed small so every weight is a modest finite number."""
    blocks = rng.integers(0, 256, size=(rows, cols // BLOCK, BLOCK_BYTES), dtype=np.uint8)
    blocks[..., 0:2] = np.frombuffer(np.float16(0.0005).tobytes(), np.uint8)
    blocks[..., 2:4] = np.frombuffer(np.float16(0.0004).tobytes(), np.uint8)
    return blocks.reshape(rows, cols // BLOCK * BLOCK_BYTES)


def _vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style vocabulary: specials, the 256 byte tokens, then letter pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen = set(tokens)
    i = 0
    while len(tokens) < n:
        k, piece = i, ""
        while True:
            piece = letters[k % 26] + piece
            k = k // 26 - 1
            if k < 0:
                break
        for cand in (piece, "▁" + piece):
            if len(tokens) < n and cand not in seen:
                tokens.append(cand)
                seen.add(cand)
                types.append(1)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n - 259)]
    return tokens, scores, types


def write_model(out: Path, size: str, seed: int = 0) -> dict:
    import gguf

    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab = SIZES[size]
    n_embd_kv = n_embd // n_head * n_head_kv
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"LlamaDesk gpu-check random {size}")
    w.add_context_length(8192)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(500000.0)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    tokens, scores, types = _vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    q4k = gguf.GGMLQuantizationType.Q4_K
    ones = np.ones(n_embd, dtype=np.float32)
    params = 0

    def mat(name: str, rows: int, cols: int) -> None:
        nonlocal params
        w.add_tensor(name, _q4k(rng, rows, cols), raw_dtype=q4k)
        params += rows * cols

    mat("token_embd.weight", n_vocab, n_embd)  # tied: also the output projection
    w.add_tensor("output_norm.weight", ones)
    for i in range(n_layer):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", ones)
        mat(b + "attn_q.weight", n_embd, n_embd)
        mat(b + "attn_k.weight", n_embd_kv, n_embd)
        mat(b + "attn_v.weight", n_embd_kv, n_embd)
        mat(b + "attn_output.weight", n_embd, n_embd)
        w.add_tensor(b + "ffn_norm.weight", ones)
        mat(b + "ffn_gate.weight", n_ff, n_embd)
        mat(b + "ffn_up.weight", n_ff, n_embd)
        mat(b + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"path": str(out), "size": size, "params": params, "bytes": out.stat().st_size,
            "n_embd": n_embd, "n_layer": n_layer, "n_vocab": n_vocab, "quant": "Q4_K"}


def main() -> int:
    p = argparse.ArgumentParser(description="write a random-weight Llama GGUF")
    p.add_argument("out", type=Path)
    p.add_argument("--size", choices=sorted(SIZES), default="1b")
    p.add_argument("--gguf-py", type=Path, help="the gguf-py folder (vendor/llama.cpp/gguf-py)")
    a = p.parse_args()
    if a.gguf_py:
        sys.path.insert(0, str(a.gguf_py))
    import json

    print(json.dumps(write_model(a.out, a.size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
