"""A stand-in for an agent platform's Prometheus series (the `agent-substrate` preset's, per
docs/guide/server-metrics.md), for the tests: real histograms and counters that follow the
wakes and parks of a run against `ObservedSubstrate`, served over HTTP on 127.0.0.1 as

- `/metrics`: a Prometheus text exposition of their state now (what a real Prometheus
  scrapes), and
- `/api/v1/query_range`: the Prometheus HTTP API over their exact history, evaluated with
  tests/promql_subset.py (the preset's queries and the dashboards' need no more).

Each successful wake observes the phases with durations drawn from a seeded stream, nested as
on the platform (scheduling and restore inside the resume, inside the parking, inside the
router's wake); every `lose_every`-th resume record is dropped (lost telemetry); a failed wake
observes a long failed resume (error_type set) and restore (ate_failure_reason set) that the
preset must leave out; every `slow_every`-th checkpoint takes 4 s, past the last bucket; a
fifth of the wakes first find no room, exported under `no_room_outcome` (the scheduler's
older `no_free_worker` or newer `no_capacity`)
"""

from __future__ import annotations

import bisect
import math
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agentsession_core.substrate.fake import FakeSubstrate, _Actor
from agentsession_core.substrate.fake_glutton import Origin
from tests import promql_subset

Labels = tuple[tuple[str, str], ...]
ROUTE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
LONG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
SIZE_BUCKETS = (1 << 20, 16 << 20, 256 << 20, 1 << 30)


@dataclass
class Histograms:
    """Every observation with its time: any past state is exact."""

    buckets: dict[str, tuple[float, ...]]
    events: list[tuple[float, str, Labels, float]] = field(default_factory=list)
    counters: set[str] = field(default_factory=set)
    _times: list[float] = field(default_factory=list)

    def observe(self, family: str, labels: dict[str, str], value: float) -> None:
        t = time.time()
        self.events.append((t, family, tuple(sorted(labels.items())), value))
        self._times.append(t)

    def count(self, family: str, labels: dict[str, str], by: float = 1.0) -> None:
        self.counters.add(family)
        self.observe(family, labels, by)

    def at(self, t: float) -> dict[tuple[str, Labels], float]:
        out: dict[tuple[str, Labels], float] = {}
        for _, family, labels, value in self.events[: bisect.bisect_right(self._times, t)]:
            if family in self.counters:
                key = (f"{family}_total", labels)
                out[key] = out.get(key, 0.0) + value
                continue
            for bound in (*self.buckets[family], math.inf):
                le = "+Inf" if math.isinf(bound) else repr(float(bound))
                key = (f"{family}_bucket", tuple(sorted((*labels, ("le", le)))))
                out[key] = out.get(key, 0.0) + (1.0 if value <= bound else 0.0)
            for suffix, add in (("_sum", value), ("_count", 1.0)):
                out[(family + suffix, labels)] = out.get((family + suffix, labels), 0.0) + add
        return out

    def exposition(self) -> str:
        lines = [f"# TYPE {f} histogram" for f in sorted(self.buckets)]
        lines += [f"# TYPE {f} counter" for f in sorted(self.counters)]
        for (name, labels), value in sorted(self.at(time.time()).items()):
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"{name}{{{text}}} {value!r}")
        return "\n".join(lines) + "\n"


ROUTE = "atenet_router_route_duration_seconds"
PARKING = "atenet_router_parking_wait_duration_seconds"
LIFECYCLE = "ate_actor_lifecycle_operation_duration_seconds"
SCHEDULER = "ate_scheduler_assignment_duration_seconds"
RESTORE = "ate_actor_restore_duration_seconds"
CHECKPOINT = "ate_actor_checkpoint_duration_seconds"
SIZES = "atelet_snapshot_size_bytes"
CRASHES = "ate_actor_crashes"


def platform_histograms() -> Histograms:
    long = {f: LONG_BUCKETS for f in (LIFECYCLE, SCHEDULER, RESTORE, CHECKPOINT)}
    return Histograms({ROUTE: ROUTE_BUCKETS, PARKING: ROUTE_BUCKETS, SIZES: SIZE_BUCKETS, **long})


class ObservedSubstrate(FakeSubstrate):
    """FakeSubstrate whose wakes and parks are observed into the platform's series."""

    def __init__(
        self,
        series: Histograms,
        *,
        seed: int = 3,
        lose_every: int = 0,
        slow_every: int = 0,
        no_room_outcome: str = "no_free_worker",
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, **kwargs)
        self.series = series
        # The scheduler's outcome when a try found no room: `no_free_worker` on older
        # platforms, `no_capacity` on newer ones; counted in `no_room` as exported.
        self.no_room_outcome = no_room_outcome
        self.no_room = 0
        self.lose_every = lose_every
        self.slow_every = slow_every
        self.resumes = 0  # successful resumes, whether recorded or lost
        self.recorded = 0
        self.checkpoints = 0
        self._draw = random.Random(seed + 1)

    async def _wake(self, actor: _Actor, origin: Origin) -> None:
        before = actor.version
        try:
            await super()._wake(actor, origin)
        except Exception as exc:
            code = getattr(exc, "code", "UNKNOWN")
            self.series.observe(
                LIFECYCLE, {"ate_actor_operation_name": "resume", "error_type": str(code)}, 9.0
            )
            self.series.observe(
                RESTORE, {"ate_snapshot_phase": "total", "ate_failure_reason": "oom"}, 9.0
            )
            if actor.status == "CRASHED":
                self.series.count(CRASHES, {"ate_failure_reason": "worker_died"})
            raise
        if actor.version != before:
            self._observe_wake(origin)

    def _observe_wake(self, origin: Origin) -> None:
        draw = self._draw
        scheduling = draw.uniform(0.005, 0.02)
        self.resumes += 1
        restore = draw.uniform(0.1, 0.3)
        resume = scheduling + restore + draw.uniform(0.005, 0.015)
        if not (self.lose_every and self.resumes % self.lose_every == 0):
            self.recorded += 1
            self.series.observe(
                LIFECYCLE, {"ate_actor_operation_name": "resume", "error_type": ""}, resume
            )
        self.series.observe(SCHEDULER, {"ate_scheduler_outcome": "assigned"}, scheduling)
        if draw.random() < 0.2:  # a first try found no room, then a worker freed
            self.no_room += 1
            self.series.observe(SCHEDULER, {"ate_scheduler_outcome": self.no_room_outcome}, 0.001)
        self.series.observe(
            RESTORE, {"ate_snapshot_phase": "total", "ate_failure_reason": ""}, restore
        )
        if origin == "router":
            parked = resume + draw.uniform(0.001, 0.005)
            self.series.observe(PARKING, {"outcome": "resumed"}, parked)
            self.series.observe(
                ROUTE,
                {"ate_router_resume": "triggered", "ate_router_outcome": "ok"},
                parked + 0.001,
            )

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        await super().suspend_actor(atespace, name, wait=wait)
        self.checkpoints += 1
        slow = self.slow_every and self.checkpoints % self.slow_every == 0
        took = 4.0 if slow else self._draw.uniform(0.2, 0.4)
        self.series.observe(CHECKPOINT, {"ate_snapshot_phase": "total"}, took)
        for file_name, size in (("memory", 64 << 20), ("disk", 8 << 20)):
            self.series.observe(SIZES, {"file_name": file_name}, float(size))


class StandIn:
    """The two HTTP faces of `series` on 127.0.0.1."""

    def __init__(self, series: Histograms) -> None:
        self.series = series
        self.asked: list[str] = []
        self.url = ""

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.series.exposition(), content_type="text/plain")

    async def query_range(self, request: web.Request) -> web.Response:
        query = request.query["query"]
        self.asked.append(query)
        start, end, step = (float(request.query[k]) for k in ("start", "end", "step"))
        steps = [start + i * step for i in range(int((end - start) / step) + 1)]
        series: dict[Labels, list[list[Any]]] = {}
        try:
            for t in steps:
                for labels, value in promql_subset.evaluate(query, self.series.at, t).items():
                    series.setdefault(labels, []).append([t, repr(value)])
        except promql_subset.PromQLError as exc:
            body = {"status": "error", "errorType": "bad_data", "error": str(exc)}
            return web.json_response(body, status=400)
        result = [{"metric": dict(k), "values": v} for k, v in series.items()]
        data = {"resultType": "matrix", "result": result}
        return web.json_response({"status": "success", "data": data})


@asynccontextmanager
async def serving(series: Histograms) -> AsyncIterator[StandIn]:
    standin = StandIn(series)
    app = web.Application()
    app.router.add_get("/metrics", standin.metrics)
    app.router.add_get("/api/v1/query_range", standin.query_range)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    standin.url = f"http://127.0.0.1:{port}"
    try:
        yield standin
    finally:
        await runner.cleanup()
