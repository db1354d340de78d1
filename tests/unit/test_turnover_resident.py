"""docs/SPEC.md §4.2 "the resident set holds its size", against the in-memory FakeSubstrate:
failed wakes are made good by later ticks within a bounded catch-up, failed fill wakes are
retried until the set is full or the fill deadline passes (then one line says so), failed
parks are retried, a failed step keeps its session resident, and the gap is booked every tick
as turnover/ResidentShortfall; the turnover_window rows come one per level.

Ticks are shortened to 100 ms (TurnoverPopulation.tick_ns), so "per tick" stands for "per
second" here. No timing is asserted: the holds are counted in ticks, with bounded waits.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from typing import Any

import pytest

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.fake import FakeSubstrate
from tests.faults import Faulty, FewWorkers

TICK_NS = 100_000_000
ATESPACE = "unit"


def engine_for(substrate: Any, **population: Any) -> Engine:
    params = RunParams(
        script="smoke",
        seed=7,
        population={
            "kind": "turnover",
            "registration_quiet_seconds": 0,
            "spawn_rate": 1000,
            **population,
        },
        cleanup={"stop_grace_seconds": 2},
    )
    return Engine(params, substrate, load_script("smoke"), Recorder(), atespace=ATESPACE)


def turnover(engine: Engine) -> TurnoverPopulation:
    population = engine.population
    assert isinstance(population, TurnoverPopulation)
    return population


async def start(engine: Engine, *, by_hand: bool = False) -> TurnoverPopulation:
    """Register and fill; `by_hand`: no ticker (the test calls tick itself, 1-second ticks)."""
    population = turnover(engine)
    if not by_hand:
        population.tick_ns = TICK_NS
    await engine.preflight()
    await engine.register()
    await engine.fill()
    if by_hand:
        for task in list(population._tasks):
            if task.get_name() == "turnover-ticks":
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    return population


async def hold_ticks(population: TurnoverPopulation, ticks: int) -> list[int]:
    """Hold until `ticks` ticks ran (bounded wait); the resident count sampled meanwhile."""
    samples: list[int] = []

    async def until() -> None:
        while population.ticks < ticks:
            samples.append(population.residents)
            await asyncio.sleep(0.013)

    await asyncio.wait_for(until(), 60)
    return samples


async def finish(engine: Engine) -> None:
    assert await engine.cleanup() == []


async def settle(population: TurnoverPopulation) -> None:
    """Every park and wake started so far has ended (the ticker keeps running)."""

    pending = [t for t in population._tasks if t.get_name() != "turnover-ticks"]
    if pending:
        await asyncio.wait(pending, timeout=60)


def totals(engine: Engine, kind: str, name: str):  # type: ignore[no-untyped-def]
    return engine.recorder.totals().row(kind, name)


# ------------------------------------------------------------------ the resident set holds
async def ticks_by_hand(population: TurnoverPopulation, ticks: int, swaps: int) -> list[int]:
    """`ticks` ticks of `swaps` swaps, each let run to its end before the next (as a tick
    100 ms later would find it on a quiet machine, and on any machine here); the resident
    count after each."""
    samples = []
    for _ in range(ticks):
        population.tick(now_ns(), swaps)
        await settle(population)
        samples.append(population.residents)
    return samples


async def test_a_fifth_of_wakes_refused_the_resident_set_holds_and_the_gap_is_booked() -> None:
    awake = 50
    engine = engine_for(
        FakeSubstrate(fail_wakes=0.2, seed=3), sessions=100, awake=awake, target_rps=20
    )
    population = await start(engine, by_hand=True)
    assert population.fill_short is None  # refused fill wakes were retried until full
    samples = await ticks_by_hand(population, 30, swaps=2)  # 20 swaps/s in ticks of 100 ms
    await finish(engine)

    wakes = totals(engine, "rps", "TimeToWake")
    assert wakes.failures > 10  # the faults were there
    shortfall = totals(engine, "turnover", "ResidentShortfall")
    assert shortfall.events == population.shortfall_total > 0  # booked every tick
    assert population.shortfall_total / population.ticks <= 0.02 * awake
    assert statistics.fmean(samples) >= 0.98 * awake
    assert population.problem() is None


async def test_one_percent_of_ops_failing_keeps_every_resident() -> None:
    awake = 20
    sub = Faulty(FakeSubstrate(seed=4), fail_ops=0.01, seed=4)
    engine = engine_for(sub, sessions=40, awake=awake, target_rps=100)
    population = await start(engine, by_hand=True)
    await ticks_by_hand(population, 20, swaps=10)  # 100 swaps/s in ticks of 100 ms
    assert population.residents == awake  # a failed step keeps its session resident
    await finish(engine)
    steps = engine.recorder.totals().aggregate(lambda key: key[1].startswith("Step_"))
    assert sub.failed > 0 and steps.failures == sub.failed
    assert population.shortfall_total == 0
    assert population.problem() is None


async def test_a_tick_makes_good_the_gap_with_a_bounded_catch_up() -> None:
    engine = engine_for(FakeSubstrate(), sessions=20, awake=10, target_rps=2)
    population = await start(engine, by_hand=True)
    for _ in range(6):  # six residents lost
        population.parked.append(population.idle.pop())
    population.tick(now_ns(), 2)
    assert population.ticks == 1 and population.shortfall_total == 6
    catch_up = population.catch_up()
    assert catch_up == 1  # max(1, ceil(0.5 × 2 swaps per tick))
    assert len(population.waking) == 2 + catch_up  # the swaps' wakes, and no more than the cap
    await settle(population)
    gaps = [6]
    while population.residents < 10:
        gaps.append(10 - population.residents)
        population.tick(now_ns(), 0)
        await settle(population)
    assert gaps == [6, 5, 4, 3, 2, 1]  # one owed wake a tick: the bounded catch-up
    await finish(engine)


class ParkFailsOnce(FakeSubstrate):
    def __init__(self) -> None:
        super().__init__()
        self.suspends: list[str] = []
        self.fail_next = False

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        self.suspends.append(name)
        if self.fail_next:
            self.fail_next = False
            raise SubstrateError("UNAVAILABLE", "try later", status=503)
        await super().suspend_actor(atespace, name, wait=wait)


async def test_a_failed_park_is_retried_first_on_the_next_tick() -> None:
    sub = ParkFailsOnce()
    engine = engine_for(sub, sessions=8, awake=4, target_rps=1)
    population = await start(engine, by_hand=True)
    victim = population.idle[0]
    sub.fail_next = True
    population.tick(now_ns(), 1)
    await settle(population)
    assert victim.awake and population.idle[0] is victim
    assert population.residents == 5  # its paired wake went ahead
    population.tick(now_ns(), 0)
    await settle(population)
    assert not victim.awake and victim in population.parked
    assert sub.suspends.count(victim.actor) == 3  # registration, the failed park, the retry
    assert population.residents == 4
    await finish(engine)


# ------------------------------------------------------------------ the fill
async def test_a_fill_with_fewer_workers_than_awake_names_the_shortfall(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentsession")
    engine = engine_for(FewWorkers(3), sessions=8, awake=6, target_rps=1, fill_deadline_seconds=0.5)
    population = await start(engine)
    await hold_ticks(population, 10)
    await finish(engine)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fill:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("fill: 3 of 6 sessions resident at the 0.5 s fill deadline")
    assert "RESOURCE_EXHAUSTED" in lines[0] and "3 short" in lines[0]
    assert population.problem() == lines[0]
    assert population.shortfall_total >= 3 * population.ticks - 3  # the gap stays booked
    assert totals(engine, "turnover", "ResidentShortfall").events == population.shortfall_total


async def test_a_fill_retries_refused_wakes_until_the_set_is_full() -> None:
    sub = Faulty(FakeSubstrate(), refuse_wakes=0.5, seed=11)
    engine = engine_for(sub, sessions=30, awake=12, target_rps=1, fill_concurrency=4)
    population = await start(engine, by_hand=True)
    assert population.fill_short is None and len(population.idle) == 12
    assert totals(engine, "http", "WakeFirstTouch").failures > 0
    await finish(engine)


# ------------------------------------------------------------------ one row per level
async def test_turnover_window_has_one_row_per_level() -> None:
    engine = engine_for(FakeSubstrate(), sessions=12, awake=4, target_rps=2)
    population = await start(engine)
    await engine.hold(0.3)
    await engine.hold(0.3, level=2.0)
    await finish(engine)
    rows = population.summary_rows(engine.recorder)
    assert set(rows) == {"turnover_window", "turnover_window_level1"}
    assert (rows["turnover_window"]["level"], rows["turnover_window"]["target_rps"]) == (1.0, 2)
    second = rows["turnover_window_level1"]
    assert (second["level"], second["target_rps"]) == (2.0, 4.0)
    assert rows["turnover_window"]["end_unix"] <= second["start_unix"]


class ParkTimes(FakeSubstrate):
    """Notes when each park was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.parked_at: list[int] = []

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        self.parked_at.append(now_ns())
        await super().suspend_actor(atespace, name, wait=wait)


@pytest.mark.parametrize("pacing", ["tick", "even"])
async def test_swap_pacing_even_spreads_a_ticks_swaps_over_the_tick(pacing: str) -> None:
    sub = ParkTimes()
    engine = engine_for(sub, sessions=12, awake=4, target_rps=4, swap_pacing=pacing)
    population = await start(engine, by_hand=True)
    population.tick_ns = TICK_NS
    sub.parked_at.clear()
    tick = now_ns()
    population.tick(tick, 4)
    if pacing == "tick":  # all four started on the tick, before anything awaited
        assert population.swaps_started == 4 and len(population.waking) == 4
    else:  # a pacer starts them, each at its own quarter of the tick
        assert population.swaps_started == 0
    await asyncio.wait_for(settle(population), 60)
    await settle(population)  # the pacer's own parks and wakes
    assert population.swaps_started == 4 and len(sub.parked_at) == 4
    if pacing == "even":
        # Never early (the pacer waits for each intended time); how late is not asserted.
        for j, sent in enumerate(sub.parked_at):
            assert sent >= tick + j * TICK_NS // 4
    assert population.residents == 4
    await finish(engine)
