"""Server-side figures for the report's synthetic run (tests/unit/report_run.py): the local
substrate's /metrics families rendered to the Prometheus text format every 2 s, parsed and
booked by a real ServerMetricsStore, cut per window and over the hold by a real ServerMetrics,
as a campaign does (docs/SPEC.md §5.9).

What the substrate "does", so tests can state figures exactly (counters grow linearly between
samples, and window edges fall on samples, so a window's rate is exact):

* snapshot bytes written at (2 + window) MiB/s x `slow`, read at 1 MiB/s;
* wakes by the router at 4/s, suspends at 4/s, requests (json, router, ok) at 8/s;
* 4 actors RUNNING, 4 SUSPENDED, 1 RESUMING every other sample, none in another state;
* all workers' RSS (100 + t) MiB at t seconds since the start; paused_bytes 0;
* parked requests 3 and the wake queue 1 at the last sample of each 10 s, else 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from agentsession_core.measure.server_metrics import ServerMetricsStore
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.substrate.protocol import ACTOR_STATUSES
from local_substrate.metric_names import PREFIX

MIB = 1024 * 1024
INTERVAL = 2
SOURCE_URL = "http://127.0.0.1:18080/metrics"


def _written_rate(window: int, slow: float) -> float:
    return (2 + window) * slow * MIB


class _Substrate(Collector):
    """The families at `t` seconds since the start (see the module's description)."""

    def __init__(self, spans: Sequence[tuple[int, int, float]], slow: float) -> None:
        self.spans, self.slow, self.t = spans, slow, 0

    def _written(self) -> float:
        total = 0.0
        for i, (a, b, _) in enumerate(self.spans):
            total += max(0, min(self.t, b) - a) * _written_rate(i, self.slow)
        return total

    def collect(self) -> Iterator[Metric]:
        t = self.t
        actors = GaugeMetricFamily(PREFIX + "actors", "Actors by state", labels=["state"])
        counts = {"RUNNING": 4, "SUSPENDED": 4, "RESUMING": (t // INTERVAL) % 2}
        for state in ACTOR_STATUSES:
            actors.add_metric([state], counts.get(state, 0))
        yield actors
        for name, value in (
            ("workers_rss_bytes", (100 + t) * MIB),
            ("paused_bytes", 0),
            ("parked_requests", 3 if t % 10 == 8 else 0),
            ("wake_queue", 1 if t % 10 == 8 else 0),
        ):
            yield GaugeMetricFamily(PREFIX + name, name, value=value)
        wakes = CounterMetricFamily(PREFIX + "wakes", "Actors resumed", labels=["via"])
        wakes.add_metric(["router"], 4 * t)
        wakes.add_metric(["control"], 0)
        yield wakes
        for name, value in (
            ("suspends", 4.0 * t),
            ("snapshot_bytes_written", self._written()),
            ("snapshot_bytes_read", 1.0 * MIB * t),
        ):
            yield CounterMetricFamily(PREFIX + name, name, value=value)
        requests = CounterMetricFamily(
            PREFIX + "requests", "Requests served", labels=["wire", "api", "outcome"]
        )
        requests.add_metric(["json", "router", "ok"], 8 * t)
        yield requests


def server_metrics(
    wall0: float, seconds: int, spans: Sequence[tuple[int, int, float]], slow: float = 1.0
) -> ServerMetrics:
    """Sampled every 2 s over `seconds`; a window cut for each (start s, end s, level)."""
    store = ServerMetricsStore()
    substrate = _Substrate(spans, slow)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(substrate)
    for t in range(0, seconds + 1, INTERVAL):
        substrate.t = t
        text = generate_latest(registry).decode()
        store.book_scrape(wall0 + t, text_string_to_metric_families(text))
    source = {
        "kind": "scrape",
        "interval_seconds": float(INTERVAL),
        "url": SOURCE_URL,
        "series": ["agentsession_substrate_*"],
    }
    metrics = ServerMetrics(store, to_unix=lambda s: wall0 + s, interval=INTERVAL, source=source)

    async def cut_all() -> None:
        for i, (a, b, level) in enumerate(spans):
            await metrics.cut(a, b, index=i, level=level)

    asyncio.run(cut_all())
    return metrics


__all__ = ["MIB", "SOURCE_URL", "server_metrics"]
