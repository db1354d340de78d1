"""Generator health (is the load generator itself the bottleneck?) and the Prometheus view.

Saturation rules (docs/SPEC.md §5.6), applied per whole second while health monitoring ran:
  * loop lag: the p99 overshoot of a 10 ms heartbeat sleep exceeds ``loop_lag_p99_ms`` (50);
  * dispatch lateness: the p99 start lag of the dispatcher's releases (row
    ``generator/DispatchLag``) exceeds ``dispatch_lag_p99_ms`` (20);
  * CPU: the process used more than ``cpu_percent_max`` (90 %) of one core that second;
  * stall: no heartbeat completed in that second at all (the loop or the clock stalled).
A window is **void** when more than ``void_fraction`` (1 %) of its seconds are saturated, and
always when any is in a window shorter than 100 s (a short window cannot absorb one).

Prometheus is a live view only; the recorder's histograms stay the source of truth. Metrics
are collected from the recorder at scrape time, so requests pay nothing for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterator

import psutil
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.measure.recorder import NS_PER_S, Recorder, RowStats, Window

LOOP_LAG_ROW = ("generator", "LoopLag")
DISPATCH_LAG_ROW = ("generator", "DispatchLag")
CPU_GAUGE = "cpu_percent"


class GeneratorHealth:
    """Heartbeat task measuring event-loop lag, and per-second process CPU, into the recorder."""

    def __init__(
        self,
        recorder: Recorder,
        interval: float = 0.01,
        *,
        loop_lag_p99_ms: float = 50.0,
        dispatch_lag_p99_ms: float = 20.0,
        cpu_percent_max: float = 90.0,
        void_fraction: float = 0.01,
    ) -> None:
        self.recorder = recorder
        self.interval = interval
        self.loop_lag_p99_ms = loop_lag_p99_ms
        self.dispatch_lag_p99_ms = dispatch_lag_p99_ms
        self.cpu_percent_max = cpu_percent_max
        self.void_fraction = void_fraction
        self._task: asyncio.Task | None = None
        self._process = psutil.Process()
        # Seconds during which the heartbeat was running: [first, last) unix seconds.
        self.monitored: list[list[int]] = []

    async def start(self) -> None:
        if self._task is not None:
            return
        self._process.cpu_percent(None)  # primes psutil's delta
        now_sec = self.recorder.second_of(self.recorder.now_ns())
        # The first (partial) second is not judged for stalls.
        self.monitored.append([now_sec + 1, now_sec + 1])
        self._task = asyncio.create_task(self._beat(), name="generator-health")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _beat(self) -> None:
        rec = self.recorder
        row = rec.row(*LOOP_LAG_ROW)
        interval_ns = round(self.interval * NS_PER_S)
        last_cpu_second = rec.second_of(rec.now_ns())
        while True:
            before = rec.now_ns()
            await asyncio.sleep(self.interval)
            woke = rec.now_ns()
            row.ok(before + interval_ns, woke, woke)
            second = rec.second_of(woke)
            # Only whole seconds count as monitored: the current one is still open.
            self.monitored[-1][1] = max(self.monitored[-1][1], second)
            if second != last_cpu_second:
                last_cpu_second = second
                rec.gauge(CPU_GAUGE, {}, self._process.cpu_percent(None))

    # -- judging ----------------------------------------------------------------------------
    def saturated_seconds(self, start_ns: int, end_ns: int) -> int:
        rec = self.recorder
        rec.flush()
        return len(self.saturated_in(rec.second_of(start_ns), rec.second_of(end_ns)))

    def saturated_in(self, first: int, last: int) -> list[tuple[int, str]]:
        """(unix second, reason) of every saturated second in [first, last)."""
        rec = self.recorder
        out: list[tuple[int, str]] = []
        for second in range(first, last):
            per_row = rec.intervals.get(second, {})
            reason = ""
            loop = per_row.get(LOOP_LAG_ROW)
            dispatch = per_row.get(DISPATCH_LAG_ROW)
            cpu = rec.gauges.get(second, {}).get((CPU_GAUGE, ()))
            if loop is not None and loop.response.count:
                p99 = loop.response.to_histogram().quantile(0.99)
                if p99 > self.loop_lag_p99_ms:
                    reason = f"loop lag p99 {p99:.1f} ms > {self.loop_lag_p99_ms:g} ms"
            elif self._was_monitored(second):
                reason = "no heartbeat in this second (loop or clock stalled)"
            if not reason and dispatch is not None and dispatch.start_lag.count:
                p99 = dispatch.start_lag.to_histogram().quantile(0.99)
                if p99 > self.dispatch_lag_p99_ms:
                    reason = f"dispatch lateness p99 {p99:.1f} ms > {self.dispatch_lag_p99_ms:g} ms"
            if not reason and cpu is not None and cpu > self.cpu_percent_max:
                reason = f"cpu {cpu:.0f}% > {self.cpu_percent_max:g}%"
            if reason:
                out.append((second, reason))
        return out

    def _was_monitored(self, second: int) -> bool:
        return any(lo <= second < hi for lo, hi in self.monitored)

    def is_void(self, window: Window) -> bool:
        return self.void_reason(window) is not None

    def void_reason(self, window: Window) -> str | None:
        """Why the window is void (which seconds, which rule), or None when it is not."""
        first, last = int(window.start_s), int(window.end_s)
        saturated = self.saturated_in(first, last)
        allowed = math.floor(self.void_fraction * (last - first))
        if len(saturated) <= allowed:
            return None
        second, reason = saturated[0]
        stamp = time.strftime("%H:%M:%S", time.gmtime(second))
        return (
            f"the load generator was saturated in {len(saturated)} of {last - first} s "
            f"(allowed {allowed}); first at {stamp} UTC: {reason}"
        )


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
    """GET /metrics on the running event loop (scrapes read the recorder on its own thread)."""

    def __init__(self, recorder: Recorder, port: int, host: str = "127.0.0.1") -> None:
        self.recorder = recorder
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RecorderCollector(recorder))
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
