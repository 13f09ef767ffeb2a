"""Multiply-adds a token costs, from the GGUF's tensor table: the compute roof's numerator.

Every matmul weight is one multiply-add per token it multiplies (its element count),
whatever its quantization; the output matrix counts for a token that gets logits
(llama.cpp skips its rows for one that does not), and attention adds Q·K and P·V
over the positions each layer attends to, a sliding window capping most of Gemma
3's. Kept apart from utilization so the compute probe can count a batch without
the roofs it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.gguf import GGUFHeader


def meta(h: GGUFHeader, key: str):
    return h.metadata.get(f"{h.architecture}.{key}")


def attended_positions(h: GGUFHeader, position: int) -> int:
    """Positions every layer attends to at `position`, summed over layers; a sliding-window
    layer reads its window only.

    Which layers slide is per architecture; llama.cpp's Gemma 3 has one full-attention
    layer in six, the only sliding pattern among the GGUF keys read here."""
    layers = meta(h, "block_count") or 0
    window = meta(h, "attention.sliding_window")
    if window and h.architecture == "gemma3":
        full = layers // 6
        return full * position + (layers - full) * min(position, window)
    return layers * position


def head_dims(h: GGUFHeader) -> tuple[int, int]:
    k_len = meta(h, "attention.key_length") or 0
    v_len = meta(h, "attention.value_length") or k_len
    if not k_len and meta(h, "embedding_length") and meta(h, "attention.head_count"):
        k_len = v_len = meta(h, "embedding_length") // meta(h, "attention.head_count")
    return k_len, v_len


def attention_macs(h: GGUFHeader, position: int) -> int:
    """Q·K and P·V multiply-adds of one token at `position`: every query head (grouped heads
    share K and V, not the arithmetic) over the positions each layer attends to."""
    heads = meta(h, "attention.head_count") or 0
    k_len, v_len = head_dims(h)
    return heads * (k_len + v_len) * attended_positions(h, position)


# Tensors that are looked up or added, not multiplied through: the embedding (a row a
# token), positional tables and RoPE factors; norms and biases are vectors.
_NOT_MATMUL = ("token_embd.", "pos_embd.", "token_types.", "rope_freqs.")


def is_matmul_weight(name: str) -> bool:
    return (name.endswith(".weight") and "norm" not in name and "rope_factors" not in name
            and not name.startswith(_NOT_MATMUL))


def output_macs(h: GGUFHeader) -> int:
    """The output projection's multiply-adds for one token's logits (a tied embedding is it)."""
    out = h.tensors.get("output.weight") or h.tensors.get("token_embd.weight")
    return out[0] if out else 0


def layer_macs(h: GGUFHeader) -> int:
    """Multiply-adds of one token through every layer's matmul weights (no output matrix)."""
    return sum(n for name, (n, _) in h.tensors.items() if is_matmul_weight(name) and name != "output.weight")


@dataclass
class TokenMacs:
    layers: int  # the layers' matmul weights
    output: int  # the output matrix, for a token that gets logits
    attention: int  # Q·K and P·V at the position
    position: int

    @property
    def total(self) -> int:
        return self.layers + self.output + self.attention


def token_macs(h: GGUFHeader, position: int, logits: bool = True) -> TokenMacs:
    """A decoded token's multiply-adds at `position`; `logits` False: llama.cpp skips the output
    rows of a token no one asked logits for (a prompt's all but last)."""
    return TokenMacs(layer_macs(h), output_macs(h) if logits else 0, attention_macs(h, position), position)


def batch_macs(h: GGUFHeader, tokens: int) -> int:
    """MACs of a `tokens`-long prompt from position 0 with logits for its last token only."""
    attention = sum(attention_macs(h, p) for p in range(1, tokens + 1))
    return layer_macs(h) * tokens + attention + output_macs(h)

