"""`tfc serve`'s Prometheus metrics (GET /metrics), with prometheus-client, the
Prometheus project's own Python client: the text exposition format and histogram
buckets without writing either by hand.

Counters and histograms are updated as requests end; the engine's gauges (queue
depth, running requests, KV blocks) are read from ``Engine.stats()`` at each
scrape, so they are never stale.
"""
from __future__ import annotations

from typing import Callable, Dict


class Metrics:
    def __init__(self, stats: Callable[[], Dict[str, float]], waiting: Callable[[], int]) -> None:
        from prometheus_client import (CollectorRegistry, Counter, Histogram,
                                       disable_created_metrics)

        disable_created_metrics()  # no *_created series: one line per count is enough

        self.registry = CollectorRegistry()
        self.requests = Counter("tfc_requests", "HTTP requests by route and status code",
                                ["route", "status"], registry=self.registry)
        self.prompt_tokens = Counter("tfc_prompt_tokens", "Prompt (or source) tokens read",
                                     registry=self.registry)
        self.generation_tokens = Counter("tfc_generation_tokens", "Tokens generated",
                                         registry=self.registry)
        self.ttft = Histogram("tfc_time_to_first_token_seconds",
                              "From a request's arrival to its first generated token",
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
                              registry=self.registry)
        self.tpot = Histogram("tfc_time_per_output_token_seconds",
                              "Mean time between a request's generated tokens",
                              buckets=(0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6, 1, 2.5, 5),
                              registry=self.registry)
        self.registry.register(_EngineCollector(stats, waiting))

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _EngineCollector:
    """The engine's own counts at scrape time."""

    def __init__(self, stats: Callable[[], Dict[str, float]], waiting: Callable[[], int]) -> None:
        self.stats = stats
        self.waiting = waiting

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        st = self.stats()
        yield GaugeMetricFamily("tfc_queue_depth", "Requests waiting: queued in the engine, and "
                                "embedding requests waiting for the encoder",
                                value=st.get("requests_queued", 0) + self.waiting())
        yield GaugeMetricFamily("tfc_requests_running", "Requests the engine is running",
                                value=st.get("requests_running", 0))
        yield GaugeMetricFamily("tfc_kv_blocks_used", "KV cache blocks in use",
                                value=st.get("kv_blocks_used", 0))
        yield GaugeMetricFamily("tfc_kv_blocks_free", "KV cache blocks free",
                                value=st.get("kv_blocks_free", 0))
        yield GaugeMetricFamily("tfc_kv_blocks_cached", "Of the free KV cache blocks, those "
                                "that hold a cached prompt prefix",
                                value=st.get("kv_blocks_cached", 0))
        yield CounterMetricFamily("tfc_prefix_cache_queries", "Prompt tokens of the requests "
                                  "the engine admitted (prefix caching on)",
                                  value=st.get("prefix_cache_queries", 0))
        yield CounterMetricFamily("tfc_prefix_cache_hits", "Of those, the tokens whose KV "
                                  "blocks came from the prefix cache",
                                  value=st.get("prefix_cache_hits", 0))
        ended = CounterMetricFamily("tfc_engine_requests", "Engine requests that ended, by "
                                    "how: finished, cancelled (a stop string, a client that "
                                    "left, shutdown) or failed", labels=["state"])
        for state in ("finished", "cancelled", "failed"):
            ended.add_metric([state], st.get(f"requests_{state}", 0))
        yield ended
        yield CounterMetricFamily("tfc_requests_preempted", "Engine requests preempted "
                                  "(their KV blocks freed, recomputed later)",
                                  value=st.get("requests_preempted", 0))
