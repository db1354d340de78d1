"""Generator health (docs/SPEC.md §5.6): is the load generator itself the bottleneck?

Saturation rules, applied per whole second while health monitoring ran:
  * loop lag: the p99 overshoot of a 10 ms heartbeat sleep exceeds ``loop_lag_p99_ms`` (50);
  * dispatch lateness: the p99 start lag of the dispatcher's releases (row
    ``generator/DispatchLag``) exceeds ``dispatch_lag_p99_ms`` (20);
  * CPU: the process used more than ``cpu_percent_max`` (90 %) of one core that second;
  * stall: no heartbeat completed in that second at all (the loop or the clock stalled).
A window is **void** when more than ``void_fraction`` (1 %) of its seconds are saturated, and
always when any is in a window shorter than 100 s (a short window cannot absorb one).

A cold-resume's fleet (docs/SPEC.md §4.7) voids a second of its own: one in which a resume the
rate asked for found no suspended actor left (``cold_resume``/FleetExhausted) measured the
fleet's size, not the platform, and the window holding it is void (``exhausted_reason``).

The engine's sessions import this module for DISPATCH_LAG_ROW, so it stays cheap to import:
the Prometheus view (prometheus_client, aiohttp.web) lives in ``measure.prometheus``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

import psutil

from agentsession_core.measure.histogram import PERCENTILES
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import (
    FLEET_EXHAUSTED_ROW,
    HEALTH_KIND,  # the kind of every row this module books
    LOAD_KINDS,
    RowKey,
    Window,
    is_breakdown,
    is_cohort_figure,
)

# The generator's rows measure the generator, not the substrate, so the CSVs, the Aggregated
# row and the judge's request rows leave them out.
LOOP_LAG_ROW = (HEALTH_KIND, "LoopLag")
DISPATCH_LAG_ROW = (HEALTH_KIND, "DispatchLag")
CPU_GAUGE = "cpu_percent"
# The saturation limits (the module docstring); report.html draws them on its health charts.
LOOP_LAG_P99_MS = 50.0
DISPATCH_LAG_P99_MS = 20.0
CPU_PERCENT_MAX = 90.0
VOID_FRACTION = 0.01


def is_request_row(key: RowKey) -> bool:
    """A row of requests (breakdowns too): not the generator's health, not the load's own
    shape. The rows the CSVs and stats.jsonl list."""
    return key[0] != HEALTH_KIND and key[0] not in LOAD_KINDS


def counts_requests(key: RowKey) -> bool:
    """A request row whose requests no other row counts (not a breakdown, not a cohort's
    figure, stats.py): the rows a total of requests adds up."""
    return is_request_row(key) and not is_breakdown(key) and not is_cohort_figure(key)


def exhausted_seconds(recorder: Recorder, first: int, last: int) -> list[tuple[int, int]]:
    """(unix second, resumes not made) of every second in [first, last) in which a
    cold-resume found no cold actor left."""
    out = []
    for second in range(first, last):
        booked = recorder.intervals.get(second, {}).get(FLEET_EXHAUSTED_ROW)
        if booked is not None and booked.events:
            out.append((second, booked.events))
    return out


def exhausted_reason(recorder: Recorder, first: int, last: int) -> str | None:
    """Why the window [first, last) is void for its fleet, or None: any second in which no
    cold actor was left voids it (its rate was the fleet's, not the platform's)."""
    seconds = exhausted_seconds(recorder, first, last)
    if not seconds:
        return None
    stamp = time.strftime("%H:%M:%S", time.gmtime(seconds[0][0]))
    missed = sum(n for _, n in seconds)
    return (
        f"fleet exhausted: no cold actor was left in {len(seconds)} of {last - first} s "
        f"({missed} resumes not made; first at {stamp} UTC): register more sessions or "
        "lower target_rps"
    )


class GeneratorHealth:
    """Heartbeat task measuring event-loop lag, and per-second process CPU, into the recorder."""

    def __init__(
        self,
        recorder: Recorder,
        interval: float = 0.01,
        *,
        loop_lag_p99_ms: float = LOOP_LAG_P99_MS,
        dispatch_lag_p99_ms: float = DISPATCH_LAG_P99_MS,
        cpu_percent_max: float = CPU_PERCENT_MAX,
        void_fraction: float = VOID_FRACTION,
        voids: bool = True,
    ) -> None:
        """`voids`: saturated seconds void a window (generator.void_when_saturated)."""
        self.recorder = recorder
        self.interval = interval
        self.loop_lag_p99_ms = loop_lag_p99_ms
        self.dispatch_lag_p99_ms = dispatch_lag_p99_ms
        self.cpu_percent_max = cpu_percent_max
        self.void_fraction = void_fraction
        self.voids = voids
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
                p99 = loop.response.to_histogram().quantile(PERCENTILES["p99"])
                if p99 > self.loop_lag_p99_ms:
                    reason = f"loop lag p99 {p99:.1f} ms > {self.loop_lag_p99_ms:g} ms"
            elif self._was_monitored(second):
                reason = "no heartbeat in this second (loop or clock stalled)"
            if not reason and dispatch is not None and dispatch.start_lag.count:
                p99 = dispatch.start_lag.to_histogram().quantile(PERCENTILES["p99"])
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
        if not self.voids:
            return None
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


__all__ = [
    "CPU_GAUGE",
    "CPU_PERCENT_MAX",
    "DISPATCH_LAG_P99_MS",
    "DISPATCH_LAG_ROW",
    "HEALTH_KIND",
    "LOOP_LAG_P99_MS",
    "LOOP_LAG_ROW",
    "VOID_FRACTION",
    "GeneratorHealth",
    "counts_requests",
    "exhausted_reason",
    "exhausted_seconds",
    "is_request_row",
]
