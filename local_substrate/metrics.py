"""The local substrate's own Prometheus metrics: GET /metrics on its HTTP port (docs/SPEC.md
§2.4, §5.9).

Two halves:
- `SubstrateCounters`, plain integers bumped by one-line hooks where things happen: actors.py
  (wakes; parked router requests and wake failures around a wake; suspends; and, through its
  one `admin` call to a worker, pauses and snapshot bytes), server.py (HTTP requests by wire) and
  ate_control.py (gRPC calls). A hook costs an integer add: nothing is formatted until a
  scrape.
- `SubstrateCollector`, which builds every family at scrape time from those counters and from
  what is true right now: actors by state, the pool (free workers, waiting resumes) and each
  worker process's RSS (psutil), so a gauge is never stale and nothing runs between scrapes.

Worker pools (docs/SPEC.md §2.6): on a substrate with pools the worker series (workers,
worker_rss_bytes, wake_queue) and wakes carry a `pool` label, the pool's name, so a slow or
full pool shows on its own. Without pools they have no such label: the exposition, and the
engine's series names (server_metrics.py), stay what they were.

/metrics takes the bearer token like every other route (server.py `_auth`): with a token the
operator closed the substrate, and these figures describe its load. Prometheus sends a token
with `authorization: {credentials: ...}` in its scrape config; the engine's sampler sends
the run's token. Scrapes are not counted as requests, so watching the substrate does not
move its request figures.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agentsession_core.substrate.protocol import (
    ACTOR_STATUSES,
    METRICS_PATH,
    OPENAPI_PATH,
    POOL_LABEL,
    is_control_path,
)
from local_substrate.metric_names import PREFIX
from local_substrate.protocol import Handler, WireError, is_protobuf

if TYPE_CHECKING:
    from local_substrate.actors import ActorLifecycle

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class SubstrateCounters:
    """What happened since the server started; the hooks below are all a caller touches."""

    parked: int = 0
    wakes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (pool, via)
    wake_failures: Counter[str] = field(default_factory=Counter)  # the WireError code
    suspends: int = 0
    pauses: int = 0
    snapshots_written: int = 0
    snapshots_read: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    @contextlib.contextmanager
    def waking(self, *, router: bool) -> Iterator[None]:
        """A wake in progress: a router request parked while its actor wakes (docs/SPEC.md
        §2.2), or a ResumeActor call; a refusal on the way out is counted by its code."""
        self.parked += router
        try:
            yield
        except WireError as exc:
            self.wake_failures[exc.code] += 1
            raise
        finally:
            self.parked -= router

    def woke(self, *, router: bool, pool: str = "") -> None:
        self.wakes[(pool, "router" if router else "control")] += 1

    def suspended(self) -> None:
        self.suspends += 1

    def worker_answered(self, op: str, body: dict[str, Any], answer: dict[str, Any]) -> None:
        """A worker admin call that succeeded (actors.py `admin`): every snapshot written to
        or read from the store passes through one of these, so the bytes are counted once.
        `bytes` is the snapshot's logical size (RAM arrays plus files); files move by hard
        link when the store shares the scratch filesystem (store.py), so the disk traffic is
        mostly the RAM part."""
        size = int(answer.get("bytes") or 0)
        if op in ("save", "spill"):
            self.snapshots_written += 1
            self.bytes_written += size
        elif op == "load" and body.get("snapshot") is not None:
            self.snapshots_read += 1
            self.bytes_read += size
        elif op == "pause":
            self.pauses += 1

    def request(self, wire: str, api: str, ok: bool) -> None:
        self.requests[(wire, api, "ok" if ok else "error")] += 1


COUNTERS = web.AppKey("substrate_counters", SubstrateCounters)


@web.middleware
async def count_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost middleware (server.py): every HTTP request by wire (json / ate, from the
    content type), API (control / router) and outcome (a status below 400 is ok). The
    counters hang on the application (`app[COUNTERS]`)."""
    if request.path == METRICS_PATH:
        return await handler(request)
    counters = request.app[COUNTERS]
    wire = "ate" if is_protobuf(request) else "json"
    api = "control" if is_control_path(request.path) or request.path == OPENAPI_PATH else "router"
    try:
        response = await handler(request)
    except BaseException:
        counters.request(wire, api, False)
        raise
    counters.request(wire, api, response.status < 400)
    return response


class SubstrateCollector(Collector):
    """Every family, built when scraped."""

    def __init__(self, lifecycle: ActorLifecycle) -> None:
        self.lifecycle = lifecycle
        self._processes: dict[int, psutil.Process] = {}

    def collect(self) -> Iterator[Metric]:
        lifecycle, counts = self.lifecycle, self.lifecycle.metrics
        states = Counter(actor.status for actor in lifecycle.actors.values())
        yield _gauge(
            "actors",
            "Actors by state",
            ["state"],
            [([s], states.get(s, 0)) for s in ACTOR_STATUSES],
        )
        yield from self._pool()
        yield _gauge(
            "parked_requests",
            "Router requests parked while their actor wakes",
            [],
            [([], counts.parked)],
        )
        pools, by_pool = _pool_label(lifecycle.pool.pools)
        yield _counter(
            "wakes",
            "Actors resumed, by what woke them",
            [*by_pool, "via"],
            [
                ([*[p] * len(by_pool), v], counts.wakes.get((p, v), 0))
                for p in pools
                for v in ("router", "control")
            ],
        )
        yield _counter(
            "wake_failures",
            "Wakes refused or failed, by code (RESOURCE_EXHAUSTED: no worker in time)",
            ["code"],
            [([code], counts.wake_failures.get(code, 0)) for code in _codes(counts)],
        )
        yield _counter(
            "suspends", "Actors suspended to the snapshot store", [], [([], counts.suspends)]
        )
        yield _counter(
            "pauses", "Actors paused on their worker (node-local)", [], [([], counts.pauses)]
        )
        yield _counter(
            "snapshots_written",
            "Snapshots written to the store",
            [],
            [([], counts.snapshots_written)],
        )
        yield _counter(
            "snapshots_read", "Snapshots loaded from the store", [], [([], counts.snapshots_read)]
        )
        yield _counter(
            "snapshot_bytes_written",
            "Bytes of snapshots written to the store (RAM arrays + files)",
            [],
            [([], counts.bytes_written)],
        )
        yield _counter(
            "snapshot_bytes_read",
            "Bytes of snapshots loaded from the store (RAM arrays + files)",
            [],
            [([], counts.bytes_read)],
        )
        yield _counter(
            "requests",
            "Requests served, by wire (json / ate), API (control / router) and outcome",
            ["wire", "api", "outcome"],
            [(list(key), counts.requests.get(key, 0)) for key in _request_keys(counts)],
        )

    def _pool(self) -> Iterator[Metric]:
        pool = self.lifecycle.pool
        alive = [w for w in pool.workers.values() if w.alive]
        pools, by_pool = _pool_label(pool.pools)
        alive_in = Counter(w.pool for w in alive)
        yield _gauge(
            "workers",
            "Worker processes: busy (hosting or loading an actor) or free",
            [*by_pool, "state"],
            [
                ([*[p] * len(by_pool), state], value)
                for p in pools
                for state, value in (
                    ("busy", alive_in[p] - pool.free_count(p or None)),
                    ("free", pool.free_count(p or None)),
                )
            ],
        )
        # A pod-less worker (pid 0, pool.py) has no memory of its own to measure.
        ordered = sorted(alive, key=lambda w: w.slot)
        rss = [(w, self._rss(w.pid) if w.pid else None) for w in ordered]
        measured = [(w, value) for w, value in rss if value is not None]
        yield _gauge(
            "worker_rss_bytes",
            "Resident memory of each worker process",
            [*by_pool, "worker"],
            [([*[w.pool] * len(by_pool), w.name], value) for w, value in measured],
        )
        yield _gauge(
            "workers_rss_bytes",
            "Resident memory of all worker processes together",
            [],
            [([], sum(value for _, value in measured))],
        )
        yield _gauge(
            "server_rss_bytes",
            "Resident memory of the server process",
            [],
            [([], self._rss(os.getpid()) or 0)],
        )
        yield _gauge(
            "paused_bytes",
            "State of paused actors held on their workers",
            [],
            [([], sum(sum(w.paused.values()) for w in alive))],
        )
        yield _gauge(
            "wake_queue",
            "Resumes waiting for a free worker",
            by_pool,
            [([p] * len(by_pool), pool.waiting(p or None)) for p in pools],
        )
        yield _counter(
            "worker_crashes",
            "Worker processes that died and were replaced",
            [],
            [([], pool.crashes)],
        )

    def _rss(self, pid: int) -> int | None:
        process = self._processes.get(pid)
        try:
            if process is None:
                process = self._processes[pid] = psutil.Process(pid)
            return int(process.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self._processes.pop(pid, None)  # a dead worker: its replacement has a new pid
            return None


# Series exported from the start at 0, so a scraper sees every counter before it moves and
# a window's increase is never lost to a series that appeared mid-window.
WAKE_FAILURE_CODES = ("RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNAVAILABLE", "ABORTED")
REQUEST_KEYS = tuple(
    (wire, api, outcome)
    for wire in ("json", "ate")
    for api in ("control", "router")
    for outcome in ("ok", "error")
)


def _pool_label(pools: dict[str, int]) -> tuple[list[str], list[str]]:
    """The pools a worker series is split by, and its pool label: none without pools."""
    return ([*pools], [POOL_LABEL]) if pools else ([""], [])


def _codes(counts: SubstrateCounters) -> list[str]:
    return [*WAKE_FAILURE_CODES, *sorted(set(counts.wake_failures) - set(WAKE_FAILURE_CODES))]


def _request_keys(counts: SubstrateCounters) -> list[tuple[str, str, str]]:
    return [*REQUEST_KEYS, *sorted(set(counts.requests) - set(REQUEST_KEYS))]


def _gauge(
    name: str, text: str, labels: list[str], values: list[tuple[list[str], float]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(PREFIX + name, text, labels=labels)
    for label_values, value in values:
        family.add_metric(label_values, value)
    return family


def _counter(
    name: str, text: str, labels: list[str], values: list[tuple[list[str], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(PREFIX + name, text, labels=labels)
    for label_values, value in values:
        family.add_metric(label_values, value)
    return family


class MetricsEndpoint:
    """GET /metrics: the registry rendered in the Prometheus text format."""

    def __init__(self, lifecycle: ActorLifecycle) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SubstrateCollector(lifecycle))

    def install(self, app: web.Application, counters: SubstrateCounters) -> None:
        """The route and the counters' place on the app (before the router's catch-all)."""
        app[COUNTERS] = counters
        app.router.add_get(METRICS_PATH, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE}
        )
