"""GET /metrics of a multi-model server: the models' loads, and each loaded model's own metrics.

The front door's own registry counts what the pool does: every load and how
long it took (`llamadesk_model_load_seconds`, from the request that asked to
the model ready to take it), every unload and why (lru, memory, idle,
request), and which models are loaded now. Each loaded model keeps its
ServeMetrics (app.serve.metrics) in a registry of its own; a scrape merges
them family by family, so a name appears once, each sample with a `model`
label (vLLM's families carry `model_name` already and keep it as it is). A
model's counters start again from zero when it is loaded again, which
Prometheus reads as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from app.serve.metrics import LATENCY_BUCKETS, ServeMetrics

# A load takes from well under a second (the bundled model, cached) to minutes (tens of GB cold).
LOAD_BUCKETS = tuple(b for b in LATENCY_BUCKETS if b >= 0.01)


class PoolMetrics:
    def __init__(self, model_ids: Iterable[str]):
        self.registry = r = CollectorRegistry()
        self.load = Histogram("llamadesk_model_load_seconds", "Model loads: asked for to ready", ["model"],
                              registry=r, buckets=LOAD_BUCKETS)
        self.last_load = Gauge("llamadesk_model_last_load_seconds", "The model's latest load", ["model"],
                               registry=r)
        self.unloads = Counter("llamadesk_model_unloads", "Model unloads by reason (lru, memory, idle, "
                               "request, shutdown)", ["model", "reason"], registry=r)
        self.loaded = Gauge("llamadesk_model_loaded", "1 while the model is loaded", ["model"], registry=r)
        for mid in model_ids:
            self.loaded.labels(mid).set(0)

    def loaded_in(self, model: str, seconds: float) -> None:
        self.load.labels(model).observe(seconds)
        self.last_load.labels(model).set(seconds)
        self.loaded.labels(model).set(1)

    def unloaded(self, model: str, why: str) -> None:
        self.unloads.labels(model, why).inc()
        self.loaded.labels(model).set(0)

    def render(self, models: dict[str, ServeMetrics]) -> bytes:
        """This registry's text, then the loaded models' families merged."""
        for m in models.values():
            m.refresh()
        merged = CollectorRegistry(auto_describe=False)
        merged.register(_Merged(models))
        return generate_latest(self.registry) + generate_latest(merged)


class _Merged:
    """The families of several models' registries as one, each sample labelled by its model."""

    def __init__(self, models: dict[str, ServeMetrics]):
        self.models = models

    def collect(self):
        families: dict[str, Metric] = {}
        for model, m in self.models.items():
            for fam in m.registry.collect():
                out = families.get(fam.name)
                if out is None:
                    out = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                for s in fam.samples:
                    labels = s.labels if "model_name" in s.labels else {"model": model, **s.labels}
                    out.add_sample(s.name, labels, s.value, s.timestamp, s.exemplar)
        yield from families.values()
