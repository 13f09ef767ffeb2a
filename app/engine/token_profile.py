"""Where one decoded token's time goes, measured through llama.cpp on the loaded model.

The roofs say how fast a token could be; this says what it spends. Each part is
timed on llama.cpp's own kernels, not estimated from sizes:

- output matrix: a step that asks for logits against the same step asking none
  (llama.cpp then skips the output rows);
- attention: a step at a deep position against one at a shallow position;
- the layers' matmuls: the weight MUL_MAT nodes of a shallow step without
  logits, timed one by one through llama.cpp's eval callback (asked for every
  node, the scheduler computes each as a graph of its own), each less the
  median time of the graph's vector nodes (norms, adds), which is what a node
  costs that does next to no arithmetic: the callback and the threads' wake-up;
- overhead: what is left of the whole (norms, RoPE, graph building, thread
  synchronisation). The same step without logits on another thread count (1,
  or 2 on one) is reported beside it: fixed costs do not shrink with threads.

Spinning threads on a loaded machine make the per-node split meaningless (each
node's thread wake-up waits for a core): profile a quiet machine.

Medians of a few rounds of a few steps each, in scratch contexts: the chat's
context and cache are not touched.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import asdict, dataclass

import llama_cpp

from app.engine import batch_fill

SHALLOW = 16  # prompt tokens before the shallow steps
DEEP = 512  # before the deep ones: a full sliding window, as deep as a short chat gets
STEPS = 8  # decode steps a round, per kind
ROUNDS = 5


@dataclass
class TokenProfile:
    threads: int
    shallow_position: int
    deep_position: int
    whole_ms: float  # a token at the deep position, with logits
    output_ms: float
    attention_ms: float  # from the shallow position to the deep one
    matmul_ms: float  # the layers' weight matmuls (attention's Q·K and P·V are not among them)
    overhead_ms: float  # the rest of the whole
    other_threads: int  # the thread count compared with (0: none)
    other_threads_ms: float | None  # a shallow step without logits on that count
    shallow_ms: float  # a shallow step with logits
    rounds: int

    def parts(self) -> dict[str, float]:
        return {"output_matrix": self.output_ms, "attention": self.attention_ms,
                "layer_matmuls": self.matmul_ms, "overhead": self.overhead_ms}

    def as_dict(self) -> dict:
        return {**asdict(self), "parts_ms": self.parts(),
                "shares": {k: v / self.whole_ms for k, v in self.parts().items()} if self.whole_ms else {}}


class _Scratch:
    """A context of its own on the model's weights, for timed single-token steps."""

    def __init__(self, model, n_ctx: int, threads: int, cb=None):
        p = llama_cpp.llama_context_params.from_buffer_copy(model.llm.context_params)
        p.n_ctx = n_ctx
        p.n_batch = p.n_ubatch = min(n_ctx, 512)
        p.n_seq_max = 1
        p.n_threads = p.n_threads_batch = threads
        p.no_perf = True
        if cb is not None:
            p.cb_eval = cb
        self.ctx = llama_cpp.llama_init_from_model(model.llm.model, p)
        if not self.ctx:
            raise RuntimeError(f"could not create a {n_ctx}-token context for the token profile")
        self.batch = llama_cpp.llama_batch_init(p.n_batch, 0, 1)
        self.n_batch = int(p.n_batch)
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model.llm.model))
        self.ids = [(1000 + 7919 * i) % n_vocab for i in range(n_ctx)]
        self.pos = 0

    def prefill(self, n: int) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        for start in range(0, n, self.n_batch):
            chunk = self.ids[start:min(n, start + self.n_batch)]
            batch_fill.fill(self.batch, chunk, start, last=False)
            self._decode()
        self.pos = n

    def back_to(self, pos: int) -> None:
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.ctx), 0, pos, -1)
        self.pos = pos

    def steps(self, n: int, logits: bool) -> list[float]:
        """Seconds of each of `n` single-token steps from the current position."""
        times = []
        for _ in range(n):
            batch_fill.fill(self.batch, [self.ids[self.pos]], self.pos, last=logits)
            t0 = time.perf_counter()
            self._decode()
            times.append(time.perf_counter() - t0)
            self.pos += 1
        return times

    def _decode(self) -> None:
        if llama_cpp.llama_decode(self.ctx, self.batch) != 0:
            raise RuntimeError("llama_decode failed in the token profile")
        llama_cpp.llama_synchronize(self.ctx)

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)


# llama.cpp's names for nodes that are MUL_MAT but not a layer's weights: attention's
# products and the output matrix.
_NOT_WEIGHTS = ("kq", "kqv", "result_output")


def _ggml(name: str, restype):
    f = getattr(llama_cpp.llama_cpp._lib, name)  # libllama: ggml's symbols resolve through it
    f.argtypes, f.restype = [ctypes.c_void_p], restype
    return f


def _matmul_seconds(model, threads: int, rounds: int) -> float:
    """The layers' weight MUL_MAT nodes of a shallow step without logits, each computed alone,
    each less the median cost of a vector node (what computing a node alone adds)."""
    op_desc, node_name = _ggml("ggml_op_desc", ctypes.c_char_p), _ggml("ggml_get_name", ctypes.c_char_p)
    nodes: list[tuple[str, str, float]] = []
    last = [0.0]

    def on_node(t, ask, _user):
        if not ask:
            now = time.perf_counter()
            nodes.append((op_desc(t).decode(), node_name(t).decode(errors="replace"), now - last[0]))
            last[0] = now
        return True

    cb = llama_cpp.ggml_backend_sched_eval_callback(on_node)
    s = _Scratch(model, 256, threads, cb)
    try:
        s.prefill(SHALLOW)
        per_step = []
        for _ in range(rounds):
            s.back_to(SHALLOW)
            nodes.clear()
            last[0] = time.perf_counter()
            s.steps(1, logits=False)
            vector = [dt for op, _, dt in nodes[1:] if op in ("ADD", "MUL", "RMS_NORM", "SCALE")]
            launch = statistics.median(vector) if vector else 0.0
            per_step.append(sum(max(dt - launch, 0.0) for op, name, dt in nodes
                                if op == "MUL_MAT" and name.split("-")[0] not in _NOT_WEIGHTS))
        return statistics.median(per_step)
    finally:
        s.close()


def profile_token(model, threads: int | None = None, deep: int | None = None, steps: int | None = None,
                  rounds: int | None = None, other: int | None = None) -> TokenProfile:
    """`other`: the second thread count (default 1, or 2 on one thread); 0: none. Unset
    figures are the module's (DEEP, STEPS, ROUNDS)."""
    threads = threads or model.report.n_threads
    deep, steps, rounds = deep or DEEP, steps or STEPS, rounds or ROUNDS
    other = (1 if threads > 1 else 2) if other is None else other
    shallow = _Scratch(model, 256, threads)
    deep_ctx = _Scratch(model, deep + steps + 16, threads)
    try:
        shallow.prefill(SHALLOW)
        deep_ctx.prefill(deep)
        with_logits, without, at_deep, on_other = [], [], [], []
        for _ in range(rounds):  # the kinds alternate, so the machine's drift falls on each
            shallow.back_to(SHALLOW)
            with_logits += shallow.steps(steps, logits=True)
            shallow.back_to(SHALLOW)
            without += shallow.steps(steps, logits=False)
            deep_ctx.back_to(deep)
            at_deep += deep_ctx.steps(steps, logits=True)
            if other:
                llama_cpp.llama_set_n_threads(shallow.ctx, other, other)
                shallow.back_to(SHALLOW)
                on_other += shallow.steps(steps, logits=False)
                llama_cpp.llama_set_n_threads(shallow.ctx, threads, threads)
    finally:
        shallow.close()
        deep_ctx.close()
    ms = {k: statistics.median(v) * 1e3 for k, v in
          (("logits", with_logits), ("none", without), ("deep", at_deep), ("other", on_other)) if v}
    whole, output, attention = ms["deep"], ms["logits"] - ms["none"], ms["deep"] - ms["logits"]
    matmul = _matmul_seconds(model, threads, rounds) * 1e3
    return TokenProfile(threads, SHALLOW, deep, whole_ms=whole, output_ms=output, attention_ms=attention,
                        matmul_ms=matmul, overhead_ms=whole - output - attention - matmul,
                        other_threads=other, other_threads_ms=ms.get("other"), shallow_ms=ms["logits"],
                        rounds=rounds)
