"""The generators bench/run.py starts, one process each (pinned with taskset by run.py).
Each mode prints one JSON line on stdout and exits.

  raw          aiohttp + uvloop, C workers POSTing /ping in a loop, no bookkeeping (ceiling)
  rawfast      the same loop over FastRouterClient (the lean client's own ceiling)
  throughput   agentsession: closed population, C zero-think one-ping sessions,
               lifecycle none, booked by the real Recorder (flushed every second)
  accuracy     agentsession: an open-loop turns population (RATE turns/s spread over S
               sessions, Poisson per session), start lag and achieved vs intended
  density      agentsession: S sessions registered and parked (turns, lifecycle none,
               no turn due), resident memory per session via psutil

Only the router path is measured. Registration (CreateActor, first touch) of the big
populations goes through the lean client for the control calls too (BenchSubstrate), so
20k-100k actors register in seconds instead of minutes through httpx; none of it is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil
import uvloop
from aiohttp_router_client import AiohttpRouterClient

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turns import TurnsPopulation
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.errors import BAD_BODY, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.router_client import FastRouterClient

PING_SCRIPT = str(Path(__file__).parent / "ping.yaml")
PING_BODY = {"message": "agentsession"}  # what ops.request_for sends for `ping`
TARGET = "bench/agent-0"
POOL = 256  # connections per client in the agentsession runs


# ---------------------------------------------------------------- the ceilings
async def raw_aiohttp(url: str, concurrency: int, seconds: float, warmup: float) -> dict:
    counted = [0]
    counting = [False]
    body = orjson.dumps(PING_BODY)
    headers = {"ate-target-actor": TARGET, "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as http:

        async def worker() -> None:
            while True:
                async with http.post(url + "/ping", data=body, headers=headers) as answer:
                    await answer.read()
                if counting[0]:
                    counted[0] += 1

        return await _timed(worker, concurrency, seconds, warmup, counted, counting)


async def raw_fast(url: str, concurrency: int, seconds: float, warmup: float) -> dict:
    counted = [0]
    counting = [False]
    client = FastRouterClient(url, max_connections=concurrency)

    async def worker() -> None:
        while True:
            await client.request(TARGET, "ping", json=PING_BODY)
            if counting[0]:
                counted[0] += 1

    try:
        return await _timed(worker, concurrency, seconds, warmup, counted, counting)
    finally:
        await client.aclose()


async def _timed(
    worker: Any, n: int, seconds: float, warmup: float, counted: list[int], counting: list[bool]
) -> dict:
    tasks = [asyncio.create_task(worker()) for _ in range(n)]
    await asyncio.sleep(warmup)
    counting[0] = True
    t0, c0 = time.monotonic(), time.process_time()
    await asyncio.sleep(seconds)
    counting[0] = False
    elapsed, cpu = time.monotonic() - t0, time.process_time() - c0
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "requests": counted[0],
        "seconds": elapsed,
        "rps": counted[0] / elapsed,
        "cpu_fraction": cpu / elapsed,
    }


# ---------------------------------------------------------------- agentsession
class BenchSubstrate(HttpSubstrate):
    """HttpSubstrate whose control calls also go over the lean client (registration speed
    only; the measured path, the router, is untouched)."""

    def __init__(self, url: str, client: str) -> None:
        super().__init__(url)
        # Bounded pools: registering 100k sessions at once must not open 100k sockets.
        self._fast_control = FastRouterClient(url, max_connections=POOL)
        if client == "aiohttp":
            self.router = AiohttpRouterClient(url, max_connections=POOL)  # type: ignore[assignment]
        elif client == "fast":
            self.router = FastRouterClient(url, max_connections=POOL)  # type: ignore[assignment]
        else:
            self.router.max_connections = POOL

    async def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        answer = await self._fast_control.request(
            "", path, json=json, params=params, method=method, timeout=30
        )
        try:
            return answer.status, orjson.loads(answer.body) if answer.body else {}
        except orjson.JSONDecodeError:
            raise SubstrateError(BAD_BODY, f"{method} {path}: undecodable") from None

    async def aclose(self) -> None:
        await super().aclose()
        await self._fast_control.aclose()


class ArrivalOffsets:
    """Stands in for RunContext.intended_log: keeps only the arrival offsets, as plain ints
    in one array, so 20k sessions' arrivals add no objects for the collector to walk."""

    def __init__(self) -> None:
        self.offsets = array("q")

    def append(self, entry: tuple[str, int, int]) -> None:
        if entry[0] == "arrival":
            self.offsets.append(entry[2])


def _params(**population: Any) -> RunParams:
    """The bench's RunParams; keyword arguments are PopulationParams fields."""
    return RunParams(
        script=PING_SCRIPT,
        think_scale=0.0,
        seed=7,
        target={"template": "benchmark-workloads/glutton", "request_timeout_seconds": 30.0},
        population={
            "lifecycle_mode": "none",
            "registration_quiet_seconds": 0.0,
            "spawn_rate": 50_000.0,
            **population,
        },
        cleanup={"stop_grace_seconds": 2.0},
    )


async def _engine(url: str, params: RunParams, client: str, population: Any = None) -> Engine:
    substrate = BenchSubstrate(url, client)
    engine = Engine(params, substrate, load_script(params.script), Recorder(), atespace="bench")
    if population is not None:
        engine.population = population(engine.ctx)
    await engine.preflight()
    return engine


async def _flush_every_second(recorder: Recorder) -> None:
    while True:
        await asyncio.sleep(1.0)
        recorder.flush()


async def _finish(engine: Engine, flusher: asyncio.Task[None]) -> None:
    flusher.cancel()
    await asyncio.gather(flusher, return_exceptions=True)
    await engine.stop()
    await engine.substrate.aclose()


def _whole_seconds(engine: Engine, seconds: float) -> tuple[int, int]:
    """A window of whole recorder seconds starting at the next second boundary."""
    rec = engine.recorder
    first = rec.second_of(now_ns()) + 1
    return first, first + max(1, int(seconds))


async def _until_second(engine: Engine, second: int) -> None:
    target_ns = engine.recorder.mono_ns_of_second(second) + 50_000_000
    await asyncio.sleep(max(0.0, (target_ns - now_ns()) / 1e9))


async def throughput(
    url: str, concurrency: int, seconds: float, warmup: float, client: str
) -> dict:
    params = _params(kind="closed", sessions=concurrency)
    engine = await _engine(url, params, client)
    flusher = asyncio.create_task(_flush_every_second(engine.recorder))
    await engine.register()
    await engine.fill()
    await asyncio.sleep(warmup)
    first, last = _whole_seconds(engine, seconds)
    await _until_second(engine, first)
    c0 = time.process_time()
    await _until_second(engine, last)
    cpu = time.process_time() - c0
    engine.recorder.flush()  # closes the window's last second
    window = engine.recorder.window_seconds(first, last)
    await _finish(engine, flusher)
    step = window.row("http", "Step_ping")
    return {
        "requests": step.count,
        "failures": step.failures,
        "seconds": window.duration_s,
        "rps": step.count / window.duration_s,
        "cpu_fraction": cpu / window.duration_s,
        "service_p50_ms": step.service.quantile(0.5),
        "service_p99_ms": step.service.quantile(0.99),
        "client": client,
    }


async def accuracy(
    url: str, rate: float, sessions: int, seconds: float, warmup: float, client: str
) -> dict:
    params = _params(
        kind="turns",
        sessions=sessions,
        turns_per_hour=rate * 3600.0 / sessions,
        turn_mean_seconds=0.001,
    )
    engine = await _engine(url, params, client, TurnsPopulation)
    arrivals = ArrivalOffsets()
    engine.ctx.intended_log = arrivals  # type: ignore[assignment]  # what was intended
    flusher = asyncio.create_task(_flush_every_second(engine.recorder))
    t_reg = time.monotonic()
    await engine.register()
    registered = time.monotonic() - t_reg
    await engine.fill()
    await asyncio.sleep(warmup)
    first, last = _whole_seconds(engine, seconds)
    await _until_second(engine, first)
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    c0 = time.process_time()
    await _until_second(engine, last)
    cpu = time.process_time() - c0
    gc.callbacks.remove(pauses)
    engine.recorder.flush()  # closes the window's last second
    window = engine.recorder.window_seconds(first, last)
    population = engine.population
    assert isinstance(population, TurnsPopulation)
    lo, hi = engine.recorder.mono_ns_of_second(first), engine.recorder.mono_ns_of_second(last)
    start = population.steady_start_ns or 0
    intended = sum(1 for offset in arrivals.offsets if lo <= start + offset < hi)
    await _finish(engine, flusher)
    step = window.row("http", "Step_ping")
    lag = step.start_lag
    duration = window.duration_s
    return {
        "offered_rps": rate,
        "sessions": sessions,
        "seconds": duration,
        "intended_rps": intended / duration,
        "achieved_rps": step.count / duration,
        "achieved_rate_ratio": step.count / intended if intended else 0.0,
        "achieved_vs_offered": step.count / (rate * duration),
        "start_lag_p50_ms": lag.quantile(0.5),
        "start_lag_p99_ms": lag.quantile(0.99),
        "start_lag_max_ms": lag.max if lag.count else 0.0,
        "failures": step.failures,
        "cpu_fraction": cpu / duration,
        "registration_s": registered,
        "client": client,
        "gc_pauses": pauses.count,
        "gc_pause_max_ms": pauses.max_ms,
    }


class GcPauses:
    """The longest cyclic-GC pause while installed (a suspect for start-lag spikes)."""

    def __init__(self) -> None:
        self.max_ms = 0.0
        self.count = 0
        self._t = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter_ns()
        else:
            self.count += 1
            self.max_ms = max(self.max_ms, (time.perf_counter_ns() - self._t) / 1e6)


def _rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


async def density(url: str, sessions: int, client: str, population: str) -> dict:
    """turnover: parked sessions wait in the parked queue (no task, no timer) — the
    population docs/SPEC.md §4.2 parks. turns: each parked session also holds its arrival task,
    sleeping until its next turn, and that turn's two random streams."""
    if population == "turnover":
        params = _params(kind="turnover", sessions=sessions, awake=0, target_rps=1.0)
        engine = await _engine(url, params, client)
    else:
        # No turn falls due during the measurement (mean gap of a million hours).
        params = _params(
            kind="turns", sessions=sessions, turns_per_hour=1e-6, turn_mean_seconds=1.0
        )
        engine = await _engine(url, params, client, TurnsPopulation)
    # Warm the pools and the code paths with one session's worth of work first.
    await engine.substrate.request("bench", "warm", "ping", json=PING_BODY)
    engine.recorder.flush()
    before = _rss()
    t_reg = time.monotonic()
    await engine.register()
    await engine.fill()
    registered = time.monotonic() - t_reg
    await asyncio.sleep(1.2)
    engine.recorder.flush()
    after = _rss()
    states = engine.population.states()
    parked = sum(1 for s in engine.population.sessions if s.created)
    out = {
        "sessions": sessions,
        "parked": parked,
        "rss_before": before,
        "rss_after": after,
        "bytes_per_parked_session": (after - before) / max(1, parked),
        "states": dict(states),
        "registration_s": registered,
        "client": client,
        "population": population,
        "tasks": len(engine.population._tasks),
    }
    engine.ctx.stopping.set()
    for task in list(engine.population._tasks):
        task.cancel()
    await engine.substrate.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["raw", "rawfast", "throughput", "accuracy", "density"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--population", choices=["turnover", "turns"], default="turnover")
    parser.add_argument("--client", choices=["default", "aiohttp", "fast"], default="default")
    a = parser.parse_args(argv)
    jobs = {
        "raw": lambda: raw_aiohttp(a.url, a.concurrency, a.seconds, a.warmup),
        "rawfast": lambda: raw_fast(a.url, a.concurrency, a.seconds, a.warmup),
        "throughput": lambda: throughput(a.url, a.concurrency, a.seconds, a.warmup, a.client),
        "accuracy": lambda: accuracy(a.url, a.rate, a.sessions, a.seconds, a.warmup, a.client),
        "density": lambda: density(a.url, a.sessions, a.client, a.population),
    }
    result: dict[str, Any] = uvloop.run(jobs[a.mode]())
    result["mode"] = a.mode
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
