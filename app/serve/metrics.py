"""GET /metrics: Prometheus text (prometheus-client), one registry per server, three vocabularies.

Every finished request is observed once and exported under three sets of names:

- LlamaDesk's own (`llamadesk_...`), as before;
- vLLM's (`vllm:...`, labelled `model_name`), so vLLM's Grafana dashboard and
  the benchmark clients that scrape a vLLM server (GuideLLM, AIPerf) read this
  one unchanged;
- llama-server's (`llamacpp:...`, unlabelled, as it writes them).

A colon is legal in a Prometheus metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`);
the naming guide keeps it for recording rules, which is why exporters seldom
use it, but vLLM and llama-server do, and dashboards match those names.

Latency histograms have ten buckets a decade (the R10 series: 1, 1.25, 1.6, 2,
2.5, 3.2, 4, 5, 6.3, 8): `histogram_quantile` interpolates inside a bucket, so
its p99 is off by at most a bucket's width, 28% here against 2.5x in a
1-2.5-5 series.

vLLM counts tokens as each step runs; here a request's tokens are counted when
it ends, so a scrape during a long reply does not see its tokens yet.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from app.slots.types import SlotResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_STEPS = (1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.3, 8)


def decades(lo: int, hi: int) -> tuple[float, ...]:
    """Ten buckets a decade from 10**lo up to 10**hi (both included)."""
    return (*(round(m * 10.0 ** e, 9) for e in range(lo, hi) for m in _STEPS), float(10 ** hi))


LATENCY_BUCKETS = decades(-3, 3)  # 1 ms to 1000 s
ITL_BUCKETS = decades(-3, 1)  # 1 ms to 10 s
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
# LlamaDesk's stop reasons in vLLM's words (its FinishReason: stop, length, abort, error)
FINISHED_REASON = {"stop": "stop", "length": "length", "cancelled": "abort", "error": "error"}


class ServeMetrics:
    def __init__(self, host, model_name: str | None = None):
        self.registry = r = CollectorRegistry()
        self.host = host
        self.model_name = model_name or Path(host.model.header.path).name
        self.requests = Counter("llamadesk_requests", "Requests by endpoint and outcome",
                                ["endpoint", "outcome"], registry=r)
        self.tokens = Counter("llamadesk_tokens", "Tokens by kind (prompt, cached, generated)", ["kind"],
                              registry=r)
        self.ttft = Histogram("llamadesk_time_to_first_token_seconds", "Queued to first text",
                              ["api"], registry=r, buckets=LATENCY_BUCKETS)
        self.tpot = Histogram("llamadesk_time_per_output_token_seconds", "Decode time per token",
                              ["api"], registry=r, buckets=ITL_BUCKETS)
        self.cache_hits = Counter("llamadesk_prompt_cache_hits", "Requests that reused a cached prefix",
                                  registry=r)
        self.reasoning = Counter("llamadesk_reasoning_tokens", "Generated tokens a thinking model spent "
                                 "reasoning before its answer (of the generated ones)", registry=r)
        g = {name: Gauge(name, doc, registry=r) for name, doc in (
            ("llamadesk_slots_busy", "Slots decoding or prefilling"),
            ("llamadesk_slots_total", "Slots for batch work (one more is kept for online requests)"),
            ("llamadesk_queue_depth", "Requests waiting for a slot"),
            ("llamadesk_generation_tokens_per_second", "Aggregate decode rate, last few seconds"),
            ("llamadesk_batches_in_progress", "Batch API batches running"),
            ("llamadesk_batch_requests_pending", "Batch API requests not finished yet"))}
        self.gauges = g
        self.vllm = _Vllm(r)
        self.llamacpp = _LlamaCpp(r)
        self.batch_counts = lambda: (0, 0)  # (batches running, requests left): set by the batch API

    def observe(self, res: SlotResult) -> None:
        """Every finished request, on the engine thread."""
        st = res.stats
        self.vllm.ended(self.model_name, res)
        if st.stop_reason == "cancelled":
            return
        api = "online" if st.online else "batch"
        self.tokens.labels("prompt").inc(st.prompt_tokens or 0)
        self.tokens.labels("cached").inc(st.cached_tokens)
        self.tokens.labels("generated").inc(st.completion_tokens or 0)
        self.reasoning.inc(st.reasoning_tokens or 0)
        if st.cached_tokens:
            self.cache_hits.inc()
        if st.ttft_from_queue_s is not None:
            self.ttft.labels(api).observe(st.ttft_from_queue_s)
        if st.decode_tok_s:
            self.tpot.labels(api).observe(1.0 / st.decode_tok_s)
        self.llamacpp.ended(res)

    def render(self) -> bytes:
        self.refresh()
        return generate_latest(self.registry)

    def refresh(self) -> None:
        """Set the gauges from the engine's stats as they stand (a scrape reads them next)."""
        s, g = self.host.stats, self.gauges
        g["llamadesk_slots_busy"].set(s.busy_slots)
        g["llamadesk_slots_total"].set(s.n_slots)
        g["llamadesk_queue_depth"].set(s.queued)
        g["llamadesk_generation_tokens_per_second"].set(s.tok_s or 0)
        running, pending = self.batch_counts()
        g["llamadesk_batches_in_progress"].set(running)
        g["llamadesk_batch_requests_pending"].set(pending)
        self.vllm.scraped(self.model_name, s)
        self.llamacpp.scraped(s)


class _Vllm:
    """vLLM's V1 names and meanings (its docs' "Production Metrics")."""

    def __init__(self, r: CollectorRegistry):
        m = ["model_name"]
        self.running = Gauge("vllm:num_requests_running", "Requests in a slot (prefilling or decoding)", m,
                             registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting for a slot", m, registry=r)
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV cache usage of running requests (1 = full)", m,
                        registry=r)
        self.queries = Counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache", m,
                               registry=r)
        self.hits = Counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache "
                            "(kept, shared with another slot, or loaded from disk)", m, registry=r)
        self.prompt = Counter("vllm:prompt_tokens", "Prompt tokens of requests that ran", m, registry=r)
        self.generation = Counter("vllm:generation_tokens", "Generated tokens", m, registry=r)
        self.success = Counter("vllm:request_success", "Finished requests by finish reason",
                               [*m, "finished_reason"], registry=r)
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Speculative checks (one pass over guesses)", m,
                              registry=r)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Guessed tokens checked", m,
                                    registry=r)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Guessed tokens the model kept", m,
                                registry=r)
        self.per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                               "Guessed tokens the model kept, by their position in the guess",
                               [*m, "position"], registry=r)

        def hist(name: str, doc: str, buckets=LATENCY_BUCKETS) -> Histogram:
            return Histogram(name, doc, m, registry=r, buckets=buckets)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Arrival to first text")
        self.itl = hist("vllm:inter_token_latency_seconds", "Between consecutive tokens", ITL_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds",
                         "A request's decode time over its tokens after the first", ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Arrival to the last token")
        self.queue = hist("vllm:request_queue_time_seconds", "Waiting for a slot")
        self.prefill = hist("vllm:request_prefill_time_seconds", "Slot to first text (the prefill)")
        self.decode = hist("vllm:request_decode_time_seconds", "First text to the last token")
        self.inference = hist("vllm:request_inference_time_seconds", "Slot to the last token")
        self.prompt_len = hist("vllm:request_prompt_tokens", "Prompt tokens per request", TOKEN_BUCKETS)
        self.gen_len = hist("vllm:request_generation_tokens", "Generated tokens per request", TOKEN_BUCKETS)

    def ended(self, model: str, res: SlotResult) -> None:
        st = res.stats
        self.success.labels(model, FINISHED_REASON.get(st.stop_reason, st.stop_reason)).inc()
        if st.slot_start is None:  # refused or cancelled before it had a slot: nothing ran
            return
        prompt, gen = st.prompt_tokens or 0, st.completion_tokens or 0
        self.queries.labels(model).inc(prompt)
        self.hits.labels(model).inc(st.cached_tokens)
        self.prompt.labels(model).inc(prompt)
        self.generation.labels(model).inc(gen)
        self.drafts.labels(model).inc(st.spec_checks)
        self.draft_tokens.labels(model).inc(st.draft_tokens)
        self.accepted.labels(model).inc(st.draft_accepted)
        for i, n in enumerate(st.draft_accepted_per_pos):
            self.per_pos.labels(model, str(i)).inc(n)
        self.prompt_len.labels(model).observe(prompt)
        self.gen_len.labels(model).observe(gen)
        for name, value in (("ttft", st.ttft_from_queue_s), ("e2e", st.total_s), ("queue", st.queue_wait_s),
                            ("prefill", st.ttft_from_slot_s),
                            ("decode", _span(st.first_token_at, st.finished_at)),
                            ("inference", _span(st.slot_start, st.finished_at))):
            if value is not None:
                getattr(self, name).labels(model).observe(value)
        itl = self.itl.labels(model)
        for gap in res.itl_s:
            itl.observe(gap)
        if gen > 1 and res.itl_s:
            self.tpot.labels(model).observe(sum(res.itl_s) / len(res.itl_s))

    def scraped(self, model: str, s) -> None:
        self.running.labels(model).set(s.busy)
        self.waiting.labels(model).set(s.queued)
        self.kv.labels(model).set(s.kv_used / s.kv_cells if s.kv_cells else 0.0)


class _LlamaCpp:
    """llama-server's names (its server-task.cpp `to_metrics`), with its meanings: prompt tokens
    exclude cached ones, and the seconds are summed over requests."""

    def __init__(self, r: CollectorRegistry):
        def counter(name: str, doc: str) -> Counter:
            return Counter(f"llamacpp:{name}", doc, registry=r)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"llamacpp:{name}", doc, registry=r)

        self.prompt = counter("prompt_tokens", "Number of prompt tokens processed, excluding cached tokens")
        self.cached = counter("prompt_tokens_cached", "Number of prompt tokens reused from the cache")
        self.prompt_s = counter("prompt_seconds", "Total time spent processing prompts")
        self.predicted = counter("tokens_predicted", "Number of generation tokens processed")
        self.predicted_s = counter("tokens_predicted_seconds", "Total time spent generating tokens")
        self.decodes = counter("n_decode", "Total number of llama_decode() calls")
        self.draft_tokens = counter("spec_decode_num_draft_tokens",
                                    "Speculative: Total draft tokens generated")
        self.accepted = counter("spec_decode_num_accepted_tokens",
                                "Speculative: Total draft tokens accepted by the target model")
        self.drafts = counter("spec_decode_num_drafts",
                              "Speculative: Total speculative decoding verification steps")
        self.per_pos = Counter("llamacpp:spec_decode_num_accepted_tokens_per_pos",
                               "Accepted tokens per draft position", ["position"], registry=r)
        self.prompt_rate = gauge("prompt_tokens_seconds", "Average prompt throughput in tokens/s")
        self.predicted_rate = gauge("predicted_tokens_seconds", "Average generation throughput in tokens/s")
        self.processing = gauge("requests_processing", "Number of requests processing")
        self.deferred = gauge("requests_deferred", "Number of requests deferred")
        self.busy_per_decode = gauge("n_busy_slots_per_decode",
                                     "Average number of busy slots per llama_decode() call")
        self.tokens_max = gauge("n_tokens_max", "Largest observed sequence length (prompt + generation)")
        self._sums = [0, 0.0, 0, 0.0, 0]  # prompt tokens, prompt s, predicted, predicted s, longest
        self._decodes = 0

    def ended(self, res: SlotResult) -> None:
        st = res.stats
        if st.slot_start is None:  # nothing ran (and the tokenizer's thread may be the caller)
            return
        evaluated = (st.prompt_tokens or 0) - st.cached_tokens
        gen = st.completion_tokens or 0
        prompt_s = st.ttft_from_slot_s or 0.0
        decode_s = sum(res.itl_s)
        self.prompt.inc(evaluated)
        self.cached.inc(st.cached_tokens)
        self.prompt_s.inc(prompt_s)
        self.predicted.inc(gen)
        self.predicted_s.inc(decode_s)
        self.draft_tokens.inc(st.draft_tokens)
        self.accepted.inc(st.draft_accepted)
        self.drafts.inc(st.spec_checks)
        for i, n in enumerate(st.draft_accepted_per_pos):
            self.per_pos.labels(str(i)).inc(n)
        s = self._sums
        s[0] += evaluated
        s[1] += prompt_s
        s[2] += max(gen - 1, 0)
        s[3] += decode_s
        s[4] = max(s[4], (st.prompt_tokens or 0) + gen)

    def scraped(self, s) -> None:
        sums = self._sums
        self.prompt_rate.set(sums[0] / sums[1] if sums[1] > 0 else 0.0)
        self.predicted_rate.set(sums[2] / sums[3] if sums[3] > 0 else 0.0)
        self.processing.set(s.busy)
        self.deferred.set(s.queued)
        self.busy_per_decode.set(s.step_slots / s.steps if s.steps else 0.0)
        self.tokens_max.set(sums[4])
        self.decodes.inc(s.steps - self._decodes)
        self._decodes = s.steps


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a
