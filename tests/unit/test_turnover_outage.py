"""Turnover after a substrate outage (docs/SPEC.md §4.2), against the in-memory FakeSubstrate:
when the watchdog sees the substrate answer again, the residents are checked against what it
runs, so a restart that lost what was in its workers shows as a booked gap, not as residents
the engine merely believes in; dead actors are replaced, the atespace is made again when the
substrate lost its state, and the owed slots are woken at the catch-up rate. The watchdog's
hook fires on the first answer after missed probes, and only then.

The real processes, SIGKILL and the restart on the same port are in
tests/integration/test_engine_recovery.py; here every step is driven by hand (ticks too).
"""

from __future__ import annotations

import asyncio

import pytest

from agentsession_core.engine import watchdog
from agentsession_core.engine.context import now_ns
from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TRANSPORT, SubstrateError
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import Template
from tests.unit.test_turnover_resident import ATESPACE, engine_for, finish, settle, start, totals


async def test_residents_lost_with_the_workers_are_a_booked_gap_and_are_replaced() -> None:
    sub = FakeSubstrate()
    engine = engine_for(sub, sessions=12, awake=4, target_rps=2)
    population = await start(engine, by_hand=True)
    residents = list(population.idle)
    sub.restart(keep_store=True)  # what the workers held is CRASHED; parked actors are kept
    # Before anything checks, the engine still believes in its four residents.
    assert population.residents == 4

    engine.substrate_back()
    await settle(population)
    assert population.residents == 0
    for session in residents:
        assert not session.awake and session in population.parked
        assert session.actor.endswith("-r1")  # a fresh actor: the crashed one was deleted
    assert totals(engine, "grpc", "DeleteActor").count == 4
    listed = {a.name: a.status for a in await sub.list_actors(ATESPACE)}
    assert all(listed[s.actor] == "SUSPENDED" for s in population.sessions)

    # The gap is booked, and woken again at one owed wake a tick (the catch-up at 2 swaps/s).
    population.tick(now_ns(), 0)
    assert population.shortfall_total == 4
    await settle(population)
    while population.residents < 4:
        population.tick(now_ns(), 0)
        await settle(population)
    assert population.ticks == 4 and population.shortfall_total == 4 + 3 + 2 + 1
    await finish(engine)


async def test_a_substrate_that_lost_its_state_gets_its_atespace_and_actors_again() -> None:
    sub = FakeSubstrate()
    engine = engine_for(sub, sessions=10, awake=3, target_rps=2)
    population = await start(engine, by_hand=True)
    sub.restart(keep_store=False)  # no atespace, no actor
    engine.substrate_back()
    await settle(population)
    # Every session, resident or parked, has a new actor in an atespace made again.
    assert ATESPACE in sub.atespaces
    listed = {a.name for a in await sub.list_actors(ATESPACE)}
    assert {s.actor for s in population.sessions} == listed
    assert len(population.parked) == 10 and population.residents == 0
    for _ in range(3):
        population.tick(now_ns(), 0)
        await settle(population)
    assert population.residents == 3
    assert totals(engine, "rps", "TimeToWake").failures == 0  # no wake met a vanished actor
    await finish(engine)
    assert await sub.list_actors(ATESPACE) == []


async def test_a_resident_the_substrate_parked_is_parked_not_replaced() -> None:
    sub = FakeSubstrate()
    engine = engine_for(sub, sessions=6, awake=2, target_rps=1)
    population = await start(engine, by_hand=True)
    kept, suspended = population.idle[0], population.idle[1]
    await sub.suspend_actor(ATESPACE, suspended.actor)  # as a clean stop of the substrate does
    engine.substrate_back()
    await settle(population)
    assert list(population.idle) == [kept] and suspended in population.parked
    assert not suspended.awake and suspended.actor.endswith(f"-{suspended.id}")
    assert totals(engine, "grpc", "DeleteActor").count == 0
    await finish(engine)


async def test_the_check_waits_for_the_turnover_and_runs_once_at_a_time() -> None:
    sub = FakeSubstrate()
    engine = engine_for(sub, sessions=6, awake=2, target_rps=1)
    population = engine.population
    engine.substrate_back()  # before the fill: nothing to check
    assert not population._tasks
    await start(engine, by_hand=True)
    engine.substrate_back()
    engine.substrate_back()
    checks = [t for t in population._tasks if t.get_name() == "check-actors"]
    assert len(checks) == 1
    await settle(population)  # type: ignore[arg-type]
    await finish(engine)


class Flaky(FakeSubstrate):
    """GetTemplate unanswered for the next `unanswered` probes; `answered` counts the others."""

    def __init__(self) -> None:
        super().__init__()
        self.unanswered = 0
        self.answered = 0

    async def get_template(self, namespace: str, name: str) -> Template:
        if self.unanswered:
            self.unanswered -= 1
            raise SubstrateError(TRANSPORT, "connection refused")
        self.answered += 1
        return await super().get_template(namespace, name)


async def test_the_watchdog_says_when_the_substrate_answers_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.01)
    sub = Flaky()
    backs: list[int] = []
    dog = watchdog.Watchdog(sub, RunParams(), on_back=lambda: backs.append(sub.answered))
    task = asyncio.create_task(dog.run())

    async def until(predicate) -> None:  # type: ignore[no-untyped-def]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60  # only a hang takes this long
        while not predicate():
            assert loop.time() < deadline, "never held"
            await asyncio.sleep(0.005)

    try:
        await until(lambda: sub.answered >= 3)
        assert backs == []  # answering all along is no outage
        before = sub.answered
        sub.unanswered = watchdog.MISSES - 1  # an outage, short of the one that ends the run
        await until(lambda: backs)
        assert backs == [before + 1]  # called on the first answer after the missed probes
        await until(lambda: sub.answered >= before + 4)
        assert len(backs) == 1 and dog.outages == 1 and dog.failure is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class ControlDown(FakeSubstrate):
    """Parks refused while `control_down` (the router still serves): the ate wire between a
    restart and gRPC's reconnect."""

    def __init__(self) -> None:
        super().__init__()
        self.control_down = False

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        if self.control_down:
            raise SubstrateError("UNAVAILABLE", "connecting")
        await super().suspend_actor(atespace, name, wait=wait)


async def test_swaps_do_not_grow_the_set_while_parks_fail_and_wakes_succeed() -> None:
    sub = ControlDown()
    engine = engine_for(sub, sessions=12, awake=4, target_rps=2)
    population = await start(engine, by_hand=True)
    sub.control_down = True
    population.tick(now_ns(), 2)  # the swaps go out together: the first failure is news
    await settle(population)
    assert population.residents == 6  # their wakes went ahead of the failed parks
    most = 0
    for _ in range(4):  # every later swap waits for its park, which fails: no wake
        population.tick(now_ns(), 2)
        await settle(population)
        most = max(most, population.residents)
    assert most == 6
    sub.control_down = False
    population.tick(now_ns(), 2)  # the surplus is parked first; the swaps go on
    await settle(population)
    population.tick(now_ns(), 2)
    await settle(population)
    assert population.residents == 4
    assert totals(engine, "turnover", "Backlog").events >= 8  # the swaps not made, booked
    await finish(engine)
