"""The engine's populations against the local substrate (real worker processes, real
sockets): seeded schedules repeat, turns arrive at their Poisson rate and stop means stop,
lifecycle and resume modes, a closed level change, and a worker killed under a session.

A hold lasts until the run did what the test judges (a session's draws, steps, a
replacement), never a set number of seconds: how fast the machine gets there is not the
property."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import statistics
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.interface import RouterResponse, Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

HOLD_CAP_S = 60.0


class Watched:
    """The real client, noting when each router request starts."""

    def __init__(self, inner: Substrate) -> None:
        self.inner = inner
        self.request_starts: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def request(self, *args: Any, **kwargs: Any) -> RouterResponse:
        self.request_starts.append(now_ns())
        return await self.inner.request(*args, **kwargs)


@pytest.fixture
async def watched(client: Substrate) -> AsyncIterator[Watched]:
    yield Watched(client)


def make_engine(
    sub: Any, target: dict[str, Any], atespace: str, *, seed: int = 7, **population: Any
) -> Engine:
    """An engine on the test substrate; keyword arguments are PopulationParams fields."""
    params = RunParams(
        target={**target, "token": TOKEN},
        script="smoke",
        think_scale=0.05,
        seed=seed,
        population={"registration_quiet_seconds": 0.0, "spawn_rate": 50.0, **population},
        cleanup={"stop_grace_seconds": 5.0},
    )
    return Engine(params, sub, load_script(params.script), Recorder(), atespace=atespace)


async def hold_until(
    engine: Engine, done: Callable[[], bool], *, level: float | None = None
) -> None:
    """Hold the load until `done()` (polled ten times a second); a minute only catches a
    hang."""
    _, _, reason = await engine.hold(
        HOLD_CAP_S, level=level, should_stop=lambda: "done" if done() else None
    )
    assert reason == "done", f"not done within {HOLD_CAP_S:g} s"


async def drive(engine: Engine, done: Callable[[], bool] | float, *, log: bool = False) -> Engine:
    """Start the load, hold it until `done()` (or for `done` seconds: a rate's span), clean
    up."""
    if log:
        engine.ctx.intended_log = []
    try:
        await engine.preflight()
        await engine.register()
        await engine.fill()
        if callable(done):
            await hold_until(engine, done)
        else:
            await engine.hold(done)
    finally:
        leaks = await engine.cleanup()
    assert leaks == []
    return engine


def logged(engine: Engine, what: str, sessions: int, least: int) -> Callable[[], bool]:
    """Every one of `sessions` drew at least `least` items of `what` (intended_log)."""

    def enough() -> bool:
        drawn = per_session(engine.ctx.intended_log or [], what)
        return len(drawn) == sessions and all(len(v) >= least for v in drawn.values())

    return enough


def row(engine: Engine, kind: str, name: str):  # type: ignore[no-untyped-def]
    return engine.recorder.totals().row(kind, name)


def per_session(log: list[tuple[str, int, int]], what: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for kind, sid, ns in log:
        if kind == what:
            out.setdefault(sid, []).append(ns)
    return out


def same_prefix(a: dict[int, list[int]], b: dict[int, list[int]], least: int) -> None:
    """Two runs drew the same schedule: every session's sequence agrees as far as both
    runs got (timing decides how far), and both got at least `least` items."""
    assert set(a) == set(b)
    for sid in a:
        n = min(len(a[sid]), len(b[sid]))
        assert n >= least, (sid, len(a[sid]), len(b[sid]))
        assert a[sid][:n] == b[sid][:n], sid


# ------------------------------------------------------------------ reproducibility
async def test_same_seed_same_think_gaps_in_a_closed_run(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str
) -> None:
    runs = []
    for seed in (7, 7, 8):
        engine = make_engine(
            client, ate_target(substrate), atespace, kind="closed", sessions=3, seed=seed
        )
        await drive(engine, logged(engine, "think", 3, least=3), log=True)
        assert engine.ctx.intended_log is not None
        runs.append(per_session(engine.ctx.intended_log, "think"))
    same_prefix(runs[0], runs[1], least=3)
    assert runs[0][0][:3] != runs[2][0][:3]


async def test_same_seed_same_turn_arrivals(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str
) -> None:
    runs = []
    for seed in (7, 7, 9):
        engine = make_engine(
            client,
            ate_target(substrate),
            atespace,
            kind="turns",
            sessions=3,
            turns_per_hour=4 * 3600,
            turn_mean_seconds=0.01,
            seed=seed,
        )
        await drive(engine, logged(engine, "arrival", 3, least=4), log=True)
        assert engine.ctx.intended_log is not None
        runs.append(per_session(engine.ctx.intended_log, "arrival"))
    same_prefix(runs[0], runs[1], least=4)
    assert runs[0][0][:4] != runs[2][0][:4]


# ------------------------------------------------------------------ turns
async def test_turn_arrivals_follow_the_poisson_rate_and_stop_means_stop(
    substrate: LocalSubstrateProcess, watched: Watched, atespace: str
) -> None:
    sessions, per_s, hold = 4, 4.0, 5.0  # lifecycle none: one worker per session
    engine = make_engine(
        watched,
        ate_target(substrate),
        atespace,
        kind="turns",
        sessions=sessions,
        turns_per_hour=per_s * 3600,
        turn_mean_seconds=0.01,
        lifecycle_mode="none",
    )
    await drive(engine, hold, log=True)
    population = engine.population
    assert engine.ctx.intended_log is not None
    start, stop = population.steady_start_ns, population.stopped_ns
    assert start is not None and stop is not None

    # Every drawn gap, per session: exponential with mean 1/rate.
    gaps = []
    for offsets in per_session(engine.ctx.intended_log, "arrival").values():
        gaps += [(b - a) / 1e9 for a, b in zip([0, *offsets], offsets, strict=False)]
    n = len(gaps)
    mean = statistics.fmean(gaps)
    assert abs(mean - 1 / per_s) < 4 * (1 / per_s) / math.sqrt(n), (n, mean)
    cv = statistics.pstdev(gaps) / mean
    assert 0.75 < cv < 1.25, cv  # exponential: 1; a fixed pacer would give ~0
    below_median = sum(g < math.log(2) / per_s for g in gaps) / n
    assert abs(below_median - 0.5) < 4 * 0.5 / math.sqrt(n), below_median

    # Turns started over the hold: Poisson count within 4 sigma of rate × time.
    expected = sessions * per_s * (stop - start) / 1e9
    arrivals = [start + offset for kind, _, offset in engine.ctx.intended_log if kind == "arrival"]
    started = [t for t in arrivals if start <= t < stop]
    assert abs(len(started) - expected) < 4 * math.sqrt(expected), (len(started), expected)
    # None dropped: every arrival the clocks booked (each when its timer fired) started or
    # was still waiting for its session's previous turn at the stop; and every one due before
    # the stop was booked, but for those whose timer the loop ran later than the stop (its
    # lateness is the run's DispatchLag). The log also holds each session's last draw, due
    # after the stop, which is never booked.
    booked = row(engine, "turns", "Arrivals").events
    waiting = sum(len(clock.due) for clock in population._clocks)
    assert population.turns_started + waiting == booked, (population.turns_started, waiting)
    late_ns = row(engine, "generator", "DispatchLag").response.max * 1e6
    due = [t for t in arrivals if t < stop]
    assert sum(1 for t in due if t < stop - late_ns) <= booked <= len(due), (booked, late_ns)

    # The stop guard: no router request starts once the population stopped.
    late = [t for t in watched.request_starts if t >= stop]
    assert late == []
    assert row(engine, "http", "Step_01_start").failures == 0


# ------------------------------------------------------------------ lifecycle and resume
@pytest.mark.parametrize(
    ("mode", "park_row"),
    [("suspend-async", "SuspendActorAsync"), ("pause", "PauseActor"), ("none", None)],
)
async def test_closed_run_in_each_lifecycle_mode(
    substrate: LocalSubstrateProcess,
    client: Substrate,
    json_client: HttpSubstrate,
    atespace: str,
    mode: str,
    park_row: str | None,
) -> None:
    # SuspendActorAsync is the json wire's alone (docs/SPEC.md §2.5).
    if mode == "suspend-async":
        client, target = json_client, {"substrate": substrate.url, "protocol": "json"}
    else:
        target = ate_target(substrate)
    engine = make_engine(client, target, atespace, kind="closed", sessions=2, lifecycle_mode=mode)

    def steps_done() -> int:
        return sum(row(engine, "http", f"Step_{s.name}").count for s in engine.script.steps)

    await drive(engine, lambda: steps_done() >= 4)
    steps = steps_done()
    failures = sum(s.failures for s in engine.recorder.totals().rows.values())
    assert failures == 0
    parks = {
        n: row(engine, "grpc", n).count for n in ("SuspendActor", "SuspendActorAsync", "PauseActor")
    }
    if park_row is None:
        assert sum(parks.values()) == 0
        assert row(engine, "http", "WakeFirstTouch").count == 0
    else:
        assert parks[park_row] >= steps  # every turn parks, plus the start
        assert sum(parks.values()) == parks[park_row]
        # A wake whose step the stop cut short has no step row.
        assert steps <= row(engine, "http", "WakeFirstTouch").count <= steps + 2
    assert await client.list_actors(atespace) == []


async def test_explicit_resume_books_resume_actor(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str
) -> None:
    engine = make_engine(
        client, ate_target(substrate), atespace, kind="closed", sessions=2, resume_mode="explicit"
    )
    await drive(engine, lambda: row(engine, "grpc", "ResumeActor").count >= 2)
    resumes = row(engine, "grpc", "ResumeActor")
    wakes = row(engine, "http", "WakeFirstTouch")
    assert resumes.count >= 2 and resumes.failures == 0
    assert resumes.count == wakes.count


# ------------------------------------------------------------------ levels
async def test_closed_level_change_adds_sessions_without_restarting_the_others(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str
) -> None:
    engine = make_engine(client, ate_target(substrate), atespace, kind="closed", sessions=4)
    try:
        await engine.preflight()
        await engine.register()
        await engine.fill()
        await hold_until(engine, lambda: row(engine, "http", "WakeFirstTouch").count >= 4)
        first = list(engine.population.sessions)
        actors = {s.id: s.actor for s in first}
        cursors = {s.id: s.cursor for s in first}
        moved: set[int] = set()

        # Until each of the first four took a step (its cursor moved: they kept working through
        # the change) and the two new sessions' actors exist.
        def changed() -> bool:
            moved.update(s.id for s in first if s.cursor != cursors[s.id])
            return len(moved) == len(first) and engine.ledger.created == 6

        await hold_until(engine, changed, level=1.5)
        assert len(engine.population.sessions) == 6
        for session in first:  # and were not restarted
            assert session.actor == actors[session.id] and session.generation == 0
    finally:
        assert await engine.cleanup() == []
    assert row(engine, "grpc", "CreateActor").count == 6
    assert row(engine, "grpc", "DeleteActor").count == 0  # nothing was replaced


# ------------------------------------------------------------------ a crashed actor
async def test_a_killed_worker_is_a_crash_and_the_session_is_replaced(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str
) -> None:
    engine = make_engine(
        client, ate_target(substrate), atespace, kind="closed", sessions=2, lifecycle_mode="none"
    )
    try:
        await engine.preflight()
        await engine.register()
        await engine.fill()
        victim = engine.population.sessions[0]
        await hold_until(engine, lambda: victim.cursor > 1)  # it stepped on its actor
        assert victim.created and victim.actor == "agent-0"
        host = (await client.get_actor(atespace, victim.actor)).worker
        workers = (await asyncio.to_thread(substrate.debug_workers))["workers"]
        os.kill(next(w["pid"] for w in workers if w["name"] == host), signal.SIGKILL)
        # Until the crash was met and the session's replacement stepped (the run went on).
        await hold_until(engine, lambda: victim.actor == "agent-0-r1" and victim.cursor > 0)
        assert row(engine, "grpc", "DeleteActor").count == 1
        names = {a.name for a in await client.list_actors(atespace)}
        assert names == {"agent-0-r1", "agent-1"}
    finally:
        assert await engine.cleanup() == []
    assert row(engine, "actor", "CrashCount").events == 1
