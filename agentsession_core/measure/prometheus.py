"""The Prometheus view (docs/SPEC.md §5.7): GET /metrics while a run goes.

Prometheus is a live view only; the recorder's histograms stay the source of truth. Metrics
are collected from the recorder at scrape time, so requests pay nothing for them.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from agentsession_core.errors import PreflightError
from agentsession_core.measure.actor_census import ActorCensus
from agentsession_core.measure.health import LOOP_LAG_ROW
from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.measure.locust_metrics import LocustCollector
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import RowStats

# Prometheus `le` bounds in seconds for request latency (from the intended time).
LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
LOOP_LAG_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


def _histogram_buckets(hist: LogHistogram, bounds_s: tuple[float, ...]) -> list[tuple[str, float]]:
    buckets = [(repr(b), float(hist.count_at_or_below(b * 1000.0))) for b in bounds_s]
    buckets.append(("+Inf", float(hist.count)))
    return buckets


class RecorderCollector(Collector):
    """Builds every metric from the recorder when scraped."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def collect(self) -> Iterator:
        rows = self.recorder.totals().rows
        requests = CounterMetricFamily(
            "agentsession_requests",
            "Booked operations by type, name and outcome",
            labels=["type", "name", "outcome"],
        )
        events = CounterMetricFamily(
            "agentsession_events", "Count-only rows (crashes, backlog)", labels=["type", "name"]
        )
        latency = HistogramMetricFamily(
            "agentsession_request_duration_seconds",
            "Latency from the intended time (no coordinated omission)",
            labels=["type", "name", "outcome"],
        )
        loop_lag = HistogramMetricFamily(
            "agentsession_loop_lag_seconds", "Event-loop heartbeat overshoot"
        )
        for (kind, name), stats in sorted(rows.items()):
            if (kind, name) == LOOP_LAG_ROW:
                loop_lag.add_metric(
                    [],
                    _histogram_buckets(stats.response, LOOP_LAG_BUCKETS_S),
                    stats.response.total / 1000.0,
                )
                continue
            self._request_metrics(kind, name, stats, requests, latency)
            if stats.events:
                events.add_metric([kind, name], stats.events)
        yield requests
        yield events
        yield latency
        yield loop_lag
        yield from self._gauges()

    @staticmethod
    def _request_metrics(
        kind: str,
        name: str,
        stats: RowStats,
        requests: CounterMetricFamily,
        latency: HistogramMetricFamily,
    ) -> None:
        ok = stats.count - stats.failures
        if stats.count:
            requests.add_metric([kind, name, "ok"], ok)
            ok_hist = stats.response.subtract(stats.failed_response)
            latency.add_metric(
                [kind, name, "ok"],
                _histogram_buckets(ok_hist, LATENCY_BUCKETS_S),
                ok_hist.total / 1000.0,
            )
        if stats.failures:
            requests.add_metric([kind, name, "fail"], stats.failures)
            latency.add_metric(
                [kind, name, "fail"],
                _histogram_buckets(stats.failed_response, LATENCY_BUCKETS_S),
                stats.failed_response.total / 1000.0,
            )
        if stats.cancelled:
            requests.add_metric([kind, name, "cancelled"], stats.cancelled)

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        by_name: dict[str, list[tuple[tuple[tuple[str, str], ...], float]]] = {}
        for (name, labels), value in self.recorder.current_gauges().items():
            by_name.setdefault(name, []).append((labels, value))
        for name, series in sorted(by_name.items()):
            metric = name if name.startswith("agentsession_") else f"agentsession_{name}"
            label_names = sorted({k for labels, _ in series for k, _ in labels})
            family = GaugeMetricFamily(metric, f"recorder gauge {name}", labels=label_names)
            for labels, value in series:
                as_dict = dict(labels)
                family.add_metric([as_dict.get(k, "") for k in label_names], value)
            yield family


class MetricsServer:
    """GET /metrics on the running event loop (scrapes read the recorder on its own thread):
    the agentsession_* families and the Locust exporter's (`user_class`: the session type;
    `census`: the substrate's count of the run's actors by state, for `locust_actors`)."""

    def __init__(
        self,
        recorder: Recorder,
        port: int,
        host: str = "127.0.0.1",
        *,
        user_class: str = "agentsession",
        routes: Callable[[web.Application], None] | None = None,
        census: ActorCensus | None = None,
    ) -> None:
        self.recorder = recorder
        self.routes = routes  # more routes on the same port (the run's control API)
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RecorderCollector(recorder))
        self.registry.register(LocustCollector(recorder, user_class, census))
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        if self.routes is not None:
            self.routes(app)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            # The run cannot start as asked: refused in one line, before any actor exists
            # (docs/SPEC.md §6.6), not an OSError's traceback.
            raise PreflightError(self._bind_refusal(exc)) from None
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    def _bind_refusal(self, exc: OSError) -> str:
        where = f"metrics_port {self.port}: {self.host}:{self.port}"
        if exc.errno == errno.EADDRINUSE:
            return (
                f"{where} is already in use (another run's metrics port?); give another "
                "port, or 0 for any free one"
            )
        if exc.errno == errno.EACCES:
            return f"{where} cannot be bound (permission denied: a port below 1024?)"
        return f"{where} cannot be bound ({exc.strerror or exc})"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


__all__ = ["LATENCY_BUCKETS_S", "LOOP_LAG_BUCKETS_S", "MetricsServer", "RecorderCollector"]
