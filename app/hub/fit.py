"""Will this model fit here? The memory a load takes, predicted from the GGUF header alone.

Asked before downloading, so only the header is at hand (hub.remote_header reads it with a
ranged request). What llama.cpp keeps resident after loading a model on the CPU:

- the mapped file: llama.cpp maps the GGUF and populates the mapping, so every page of it,
  tensor data and header, is resident (the tensor table's sum is its "model buffer size");
- the KV cache: cells for the context (padded to 256, as llama.cpp does) x layers x KV heads
  x (key + value) head dims x the element size; a sliding-window layer (Gemma 2 and 3,
  gpt-oss) holds only its window plus one ubatch of cells. llama.cpp clears the buffer at
  creation, so it is resident at once;
- the vocabulary's tables (each token's text, score and attributes, and two lookup maps):
  about 170 bytes a token, measured on llama.cpp's tokenizer with Gemma's 262,144 tokens;
- the logits of one sequence (n_vocab floats);
- where the engine runs llama.cpp's AMX kernel (app.engine.backend.amx), a repacked copy of
  every weight whose type that kernel takes, beside the mapped file's pages it was read from,
  and of a tied output matrix (the embedding stays for the lookup, the output gets its own).

The compute buffer llama.cpp reserves is sized for a full ubatch of logits, which a chat
never asks for, so it is mostly never touched; what a prompt does touch (one ubatch of
activations and, without flash attention, its attention scores) is added as `compute`
for the fit label, but not to the resident figure `llamadesk bench --fit` checks.
With layers on a GPU, the weights but the token embedding, the KV cache and the compute
buffer (one ubatch's activations and attention scores) count against the GPU's free memory
instead: what llama.cpp reports allocating on the device (LoadReport.device_buffers), which
`bench --fit` puts beside this prediction on a real Vulkan device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from app.engine.gguf import GGUFHeader, human_size
from app.engine.utilization import KV_ELEMENT_BYTES

VOCAB_ENTRY_BYTES = 170
KV_PAD = 256
N_UBATCH = 256  # app.engine.loader.LoadOptions' default
FITS_SHARE = 0.8  # "fits" leaves a fifth of the free memory for everything else; up to all of it is "tight"
# ggml types llama.cpp's AMX kernel takes (ggml-cpu/amx/common.h, qtype_has_amx_kernels):
# Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS.
AMX_TYPES = {2, 3, 8, 12, 13, 14, 23}
SLIDING_PATTERNS = {"gemma3": 6, "gemma2": 2, "gpt-oss": 2, "cohere2": 4}  # every n-th layer is global


@dataclass
class Prediction:
    """Bytes a load takes, by part, and the verdict against this machine's free memory."""

    n_ctx: int
    mapped: int  # the GGUF file, mapped and resident
    kv: int
    vocab: int
    logits: int
    compute: int  # what a prompt's step touches beyond the resident parts
    repacked: int = 0  # copies in llama.cpp's AMX buffer, beside the mapped file
    gpu: int = 0  # on the GPU instead, when layers are offloaded
    ram_free: int | None = None
    vram_free: int | None = None
    label: str = "?"

    @property
    def resident(self) -> int:
        """Resident memory right after the load (what bench --fit measures)."""
        return self.mapped + self.kv + self.vocab + self.logits + self.repacked

    @property
    def ram_needed(self) -> int:
        return self.resident + self.compute

    def summary(self) -> str:
        ram = f"needs {human_size(self.ram_needed)} of RAM"
        if self.ram_free is not None:
            ram += f" ({human_size(self.ram_free)} free)"
        parts = [f"{self.label}: {ram}"]
        if self.gpu:
            free = f" ({human_size(self.vram_free)} free)" if self.vram_free is not None else ""
            parts.append(f"{human_size(self.gpu)} of GPU memory{free}")
        parts.append(f"weights {human_size(self.mapped)}, KV cache {human_size(self.kv)} at "
                     f"{self.n_ctx:,} tokens")
        return "; ".join(parts)

    def to_json(self) -> dict:
        d = asdict(self)
        d["resident"], d["ram_needed"] = self.resident, self.ram_needed
        return d


def _meta(h: GGUFHeader, key: str, default=0):
    v = h.metadata.get(f"{h.architecture}.{key}")
    return v if isinstance(v, (int, float)) else default


def _pad(n: int, to: int = KV_PAD) -> int:
    return (n + to - 1) // to * to


def n_vocab(h: GGUFHeader) -> int:
    embd = h.tensors.get("token_embd.weight")
    width = _meta(h, "embedding_length")
    if embd and width:
        return embd[0] // width
    return int(_meta(h, "vocab_size"))


def kv_cache_bytes(h: GGUFHeader, n_ctx: int, kv_type: str = "f16", n_ubatch: int = N_UBATCH) -> int:
    """The KV cache llama.cpp allocates for `n_ctx` tokens of one sequence."""
    layers = int(_meta(h, "block_count"))
    heads = _meta(h, "attention.head_count")
    kv_heads = _meta(h, "attention.head_count_kv") or heads
    k_len = _meta(h, "attention.key_length") or (_meta(h, "embedding_length") // heads if heads else 0)
    v_len = _meta(h, "attention.value_length") or k_len
    per_cell = kv_heads * (k_len + v_len) * KV_ELEMENT_BYTES.get(kv_type, 2.0)
    cells = _pad(n_ctx)
    window = int(_meta(h, "attention.sliding_window"))
    pattern = SLIDING_PATTERNS.get(h.architecture)
    if window and pattern:
        full = layers // pattern
        swa_cells = min(cells, _pad(window + n_ubatch))
        return int(per_cell * (full * cells + (layers - full) * swa_cells))
    return int(per_cell * layers * cells)


def compute_bytes(h: GGUFHeader, n_ctx: int, flash_attn: bool = False, n_ubatch: int = N_UBATCH) -> int:
    """What one prompt ubatch's graph touches: a few activations of the model's width and its
    feed-forward width per token, and without flash attention the scores of every head."""
    width = _meta(h, "embedding_length")
    ff = _meta(h, "feed_forward_length")
    ff = ff if isinstance(ff, int) else 4 * width
    heads = _meta(h, "attention.head_count")
    scores = 0 if flash_attn else n_ubatch * _pad(n_ctx) * heads * 4
    return int(n_ubatch * (8 * width + 3 * ff) * 4 + scores)


def amx_copies(h: GGUFHeader) -> int:
    """Bytes llama.cpp's AMX buffer takes for `h`: the layers' weights of the types its kernel
    takes, and the output matrix (a tied embedding's own copy)."""
    def takes(name: str) -> bool:
        return h.tensor_types.get(name) in AMX_TYPES
    total = sum(b for name, (_, b) in h.tensors.items() if name.startswith("blk.") and takes(name))
    out = "output.weight" if "output.weight" in h.tensors else "token_embd.weight"
    return total + (h.tensors[out][1] if out in h.tensors and takes(out) else 0)


def predict(h: GGUFHeader, n_ctx: int, *, kv_type: str = "f16", flash_attn: bool = False,
            gpu_layers: int = 0, size: int | None = None, amx: bool | None = None) -> Prediction:
    """The memory a load of `h` at `n_ctx` takes; `gpu_layers` (-1 = all) moves the weights, the
    KV cache and the compute buffer to the GPU in proportion. `size`: another quantization of
    the same model (a search reads one header per repository), whose weights are its file.
    `amx`: whether the engine runs llama.cpp's AMX kernel (None: as this process's does)."""
    vocab = n_vocab(h)
    size = size or h.size
    if amx is None:
        from app.engine.backend import amx as engine_amx

        amx = engine_amx().on
    p = Prediction(n_ctx=n_ctx, mapped=size, kv=kv_cache_bytes(h, n_ctx, kv_type),
                   vocab=vocab * VOCAB_ENTRY_BYTES, logits=vocab * 4,
                   compute=compute_bytes(h, n_ctx, flash_attn),
                   repacked=int(amx_copies(h) * size / h.size) if amx else 0)
    layers = int(_meta(h, "block_count")) or 1
    on_gpu = layers if gpu_layers < 0 else min(gpu_layers, layers)
    if on_gpu:
        share = on_gpu / layers
        embd = (h.tensors.get("token_embd.weight") or (0, 0))[1]
        weights = (sum(b for _, b in h.tensors.values()) - embd) * size / h.size
        p.gpu = int(share * (weights + p.kv) + p.compute)
        p.mapped = int(size - share * weights)
        p.kv = int(p.kv * (1 - share))
        p.repacked = int(p.repacked * (1 - share))
        p.compute = 0
    return p


def judge(p: Prediction, ram_free: int | None, vram_free: int | None) -> Prediction:
    """Label `p` against free RAM (and GPU memory where it uses the GPU): fits, tight, won't fit."""
    p.ram_free, p.vram_free = ram_free, vram_free
    verdicts = [_verdict(p.ram_needed, ram_free)]
    if p.gpu:
        verdicts.append(_verdict(p.gpu, vram_free))
    order = ["fits", "tight", "won't fit", "?"]
    p.label = max(verdicts, key=order.index)
    return p


def _verdict(need: int, free: int | None) -> str:
    if free is None:
        return "?"
    if need <= FITS_SHARE * free:
        return "fits"
    return "tight" if need <= free else "won't fit"
