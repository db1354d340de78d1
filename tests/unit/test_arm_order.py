"""docs/SPEC.md §6.8: a paired run's arms take turns at ticking first (ArmOrder). Every
second holds one tick of each arm, half a second apart; every round of two seconds holds
both orders once; the order comes from the run's seed (the same in every process and shard)
and is not a fixed alternation. Schedules only: nothing here sleeps or times anything."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import RunContext
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.reference_arm import LEAD_NS, TRAIL_NS, ArmOrder, ReferenceArm
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import CANDIDATE, REFERENCE
from agentsession_core.script import load_script
from agentsession_core.substrate.fake import FakeSubstrate

ARMS = (CANDIDATE, REFERENCE)
T0 = 1_000 * NS_PER_S  # a whole second


def context(phase: Any = None) -> RunContext:
    params = RunParams(script="smoke", seed=7)
    ctx = RunContext(
        FakeSubstrate(), Recorder(), load_script("smoke"), params, "u", ActorLedger("u")
    )
    ctx.tick_phase = phase
    return ctx


@pytest.mark.parametrize("seed", [0, 7, 2026])
def test_every_round_of_two_seconds_holds_both_orders_once(seed: int) -> None:
    order = ArmOrder(seed)
    for first in range(0, 400, 2):
        assert {order.leader(first), order.leader(first + 1)} == set(ARMS)


@pytest.mark.parametrize("block_seconds", [2, 4, 10, 60])
def test_blocks_of_whole_rounds_hold_each_order_equally(block_seconds: int) -> None:
    order = ArmOrder(7)
    for start in range(0, 600, block_seconds):
        leaders = [order.leader(s) for s in range(start, start + block_seconds)]
        assert leaders.count(CANDIDATE) == leaders.count(REFERENCE) == block_seconds // 2


def test_a_five_second_block_holds_each_order_two_or_three_times() -> None:
    order = ArmOrder(7)
    for start in range(0, 600, 5):
        assert [order.leader(s) for s in range(start, start + 5)].count(CANDIDATE) in (2, 3)


def test_the_order_is_the_seeds() -> None:
    def rounds(seed: int) -> list[str]:
        return [ArmOrder(seed).leader(s) for s in range(0, 200, 2)]

    assert rounds(7) == rounds(7)  # reproducible: a shard computes its own, the same
    assert rounds(7) != rounds(8)
    firsts = rounds(7)
    # Drawn, not alternated: both arms open rounds, and not in a fixed pattern.
    assert 30 <= firsts.count(CANDIDATE) <= 70
    assert firsts != [firsts[0], firsts[1]] * 50


def test_each_second_holds_one_tick_per_arm_half_a_second_apart() -> None:
    order = ArmOrder(2026)
    for second in range(300):
        phases = {arm: order.phase_ns(arm, second) for arm in ARMS}
        assert sorted(phases.values()) == [LEAD_NS, TRAIL_NS]
        assert TRAIL_NS - LEAD_NS == NS_PER_S // 2
        assert phases[order.leader(second)] == LEAD_NS


def test_the_ticks_of_both_arms_lie_where_the_order_puts_them() -> None:
    order = ArmOrder(11)
    ticks: dict[str, list[int]] = {}
    for arm in ARMS:
        ctx = context(order.of(arm))
        ctx.common_t0 = _at(T0)
        first = asyncio.run(ctx.steady_start())
        assert first == T0 + order.phase_ns(arm, 0)  # its first tick, in the common second
        ticks[arm] = [ctx.tick_time(first, k, NS_PER_S) for k in range(120)]
    for k in range(120):
        second = T0 + k * NS_PER_S
        c, r = ticks[CANDIDATE][k], ticks[REFERENCE][k]
        assert second <= min(c, r) and max(c, r) < second + NS_PER_S  # one each, same second
        assert abs(c - r) == NS_PER_S // 2
        assert (c < r) == (order.leader(k) == CANDIDATE)
    # So every second holds exactly one tick of each arm.
    for arm in ARMS:
        assert [(t - T0) // NS_PER_S for t in ticks[arm]] == list(range(120))


def test_an_unpaired_run_ticks_on_whole_ticks() -> None:
    ctx = context()
    assert [ctx.tick_time(T0, k, 100_000_000) for k in range(3)] == [
        T0,
        T0 + 100_000_000,
        T0 + 200_000_000,
    ]


def _at(t0: int) -> Any:
    async def common() -> int:
        return t0

    return common


def _engine(seed: int) -> Engine:
    params = RunParams(
        script="smoke",
        seed=seed,
        population={"kind": "turnover", "sessions": 4, "awake": 2, "target_rps": 2},
        reference={"substrate": "http://127.0.0.1:1", "router": "http://127.0.0.1:2"},
    )
    return Engine(params, FakeSubstrate(), load_script("smoke"), Recorder(), atespace="u")


def test_a_paired_runs_turnover_ticks_by_the_arm_order() -> None:
    """Arms.pair gives both engines the run's order, and the turnover's ticker follows it."""
    candidate = _engine(5)
    recorder = candidate.recorder
    arm = ReferenceArm(candidate.params, recorder, "u")
    arm.engine = Engine(
        arm.params, FakeSubstrate(), load_script("smoke"), arm.recorder, atespace="u-reference"
    )
    arms = Arms(arm)
    arms.candidate = candidate
    arms.pair(recorder)
    order = ArmOrder(5)

    async def both() -> list[list[int]]:  # both at once: they start in one second
        return await asyncio.wait_for(asyncio.gather(*(_ticks(e, 40) for e in arms.engines)), 30)

    seen = dict(zip(ARMS, asyncio.run(both()), strict=True))
    first = seen[CANDIDATE][0] - order.phase_ns(CANDIDATE, 0)
    assert first % NS_PER_S == recorder.mono_ns_of_second(0) % NS_PER_S  # a whole second
    for name, intended in seen.items():
        assert intended == [first + k * NS_PER_S + order.phase_ns(name, k) for k in range(40)]


async def _ticks(engine: Engine, count: int) -> list[int]:
    """The intended times of a turnover's first `count` ticks, without waiting for them."""
    population = engine.population
    assert isinstance(population, TurnoverPopulation)
    ctx = engine.ctx
    intended: list[int] = []

    async def wait_until(deadline_ns: int) -> bool:
        intended.append(deadline_ns)
        if len(intended) >= count:
            ctx.stopping.set()
        return True

    ctx.wait_until = wait_until  # type: ignore[method-assign]
    population.tick = lambda *_: None  # type: ignore[method-assign]
    await population._tick_forever(await ctx.steady_start())
    return intended
