"""GET /metrics: Prometheus text (prometheus-client), one registry per server.

The names follow llama-server's and vLLM's habits (a `llamadesk:` prefix is
not legal Prometheus, so `llamadesk_`), so a dashboard built for either reads
these with a rename.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from app.batch.types import SlotResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServeMetrics:
    def __init__(self, host):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("llamadesk_requests", "Requests by endpoint and outcome",
                                ["endpoint", "outcome"], registry=r)
        self.tokens = Counter("llamadesk_tokens", "Tokens by kind (prompt, cached, generated)", ["kind"],
                              registry=r)
        self.ttft = Histogram("llamadesk_time_to_first_token_seconds", "Queued to first text",
                              ["api"], registry=r,
                              buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.tpot = Histogram("llamadesk_time_per_output_token_seconds", "Decode time per token",
                              ["api"], registry=r, buckets=(.002, .005, .01, .02, .05, .1, .2, .5, 1))
        self.cache_hits = Counter("llamadesk_prompt_cache_hits", "Requests that reused a cached prefix",
                                  registry=r)
        g = {name: Gauge(name, doc, registry=r) for name, doc in (
            ("llamadesk_slots_busy", "Slots decoding or prefilling"),
            ("llamadesk_slots_total", "Slots for batch work (one more is kept for online requests)"),
            ("llamadesk_queue_depth", "Requests waiting for a slot"),
            ("llamadesk_generation_tokens_per_second", "Aggregate decode rate, last few seconds"),
            ("llamadesk_batches_in_progress", "Batch API batches running"),
            ("llamadesk_batch_requests_pending", "Batch API requests not finished yet"))}
        self.gauges = g
        self.host = host
        self.batch_counts = lambda: (0, 0)  # (batches running, requests left): set by the batch API

    def observe(self, res: SlotResult) -> None:
        """Every finished request, on the engine thread."""
        st = res.stats
        api = "online" if st.online else "batch"
        if st.stop_reason == "cancelled":
            return
        self.tokens.labels("prompt").inc(st.prompt_tokens or 0)
        self.tokens.labels("cached").inc(st.cached_tokens)
        self.tokens.labels("generated").inc(st.completion_tokens or 0)
        if st.cached_tokens:
            self.cache_hits.inc()
        if st.ttft_from_queue_s is not None:
            self.ttft.labels(api).observe(st.ttft_from_queue_s)
        if st.decode_tok_s:
            self.tpot.labels(api).observe(1.0 / st.decode_tok_s)

    def render(self) -> bytes:
        s, g = self.host.stats, self.gauges
        g["llamadesk_slots_busy"].set(s.busy_slots)
        g["llamadesk_slots_total"].set(s.n_slots)
        g["llamadesk_queue_depth"].set(s.queued)
        g["llamadesk_generation_tokens_per_second"].set(s.tok_s or 0)
        running, pending = self.batch_counts()
        g["llamadesk_batches_in_progress"].set(running)
        g["llamadesk_batch_requests_pending"].set(pending)
        return generate_latest(self.registry)
