"""Sharding (engine/shards/): the exact split, per-shard seeds, the merged stream, the
shared ledger and the generator parameters. No Dask, no processes."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession_core.engine.pacing import poisson_gap_ns, stream, think_jitter
from agentsession_core.engine.params import GeneratorParams, RunParams, parse
from agentsession_core.engine.shards.shard import JournalLedger
from agentsession_core.engine.shards.split import (
    is_sharded,
    plan_shards,
    replan,
    shard_count,
    shard_levels,
    split_int,
    split_rate,
)
from agentsession_core.engine.shards.stream import Loss, MergedHealth, ShardDelta, ShardStream
from agentsession_core.errors import UsageError
from agentsession_core.measure.health import CPU_GAUGE, LOOP_LAG_ROW
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import Window

# What the coordinator hands its shards for an embedded substrate: its ate endpoints.
TARGET = {"substrate": "grpc://127.0.0.1:1", "router": "http://127.0.0.1:2", "atespace": "shared"}
WALL0 = 1_700_000_000.0
MONO0 = 5 * NS_PER_S


def run_params(**population) -> RunParams:
    return RunParams(
        seed=11,
        population={"kind": "turnover", "sessions": 1000, "awake": 100, "target_rps": 5.5}
        | population,
    )


# ---------------------------------------------------------------- the split
# No deadline, no too_slow: on a loaded machine an example's time says nothing about the code.
UNTIMED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@UNTIMED
@given(total=st.integers(0, 10_000), count=st.integers(1, 8))
def test_whole_shares_add_up_and_differ_by_at_most_one(total, count):
    shares = split_int(total, count)
    assert sum(shares) == total and len(shares) == count
    assert max(shares) - min(shares) <= 1


@UNTIMED
@given(total=st.floats(0, 1e6, allow_nan=False, allow_infinity=False), count=st.integers(1, 8))
def test_rate_shares_add_up_exactly(total, count):
    shares = split_rate(total, count)
    assert sum(shares) == total  # exactly, not approximately
    assert all(s >= 0 for s in shares)
    # Whole swaps spread like split_int: no shard ticks more than one swap above another's.
    assert max(math.floor(s) for s in shares) - min(math.floor(s) for s in shares) <= 1


@pytest.mark.parametrize("count", range(1, 9))
@pytest.mark.parametrize(
    "population",
    [
        {"sessions": 1000, "awake": 100, "target_rps": 5.5, "fill_concurrency": 8},
        {"sessions": 17, "awake": 17, "target_rps": 3.0, "fill_concurrency": 3},
        {"sessions": 9, "awake": 0, "target_rps": 0.25, "fill_concurrency": 1},
    ],
)
def test_every_total_is_the_sum_of_the_shards(count, population):
    params = run_params(**population)
    plans = plan_shards(params, count, target=TARGET)
    pops = [p.params.population for p in plans]
    assert [p.index for p in plans] == list(range(count))
    assert sum(p.sessions for p in pops) == population["sessions"]
    assert sum(p.awake for p in pops) == population["awake"]
    assert sum(p.target_rps for p in pops) == population["target_rps"]
    assert all(p.awake <= p.sessions for p in pops)
    assert sum(p.spawn_rate for p in pops) == pytest.approx(params.population.spawn_rate)
    assert all(p.fill_concurrency >= 1 for p in pops)
    # One atespace, the coordinator's substrate, disjoint actor names, one process each.
    assert {p.params.target.atespace for p in plans} == {"shared"}
    assert {p.params.target.substrate for p in plans} == {TARGET["substrate"]}
    assert len({p.actor_prefix for p in plans}) == count
    assert all(p.params.generator.shards == 1 for p in plans)
    assert all(p.params.metrics_port is None for p in plans)


@pytest.mark.parametrize("count", range(1, 9))
@pytest.mark.parametrize("level", [0.5, 1.0, 1.5, 2.0, 3.3])
def test_a_level_splits_its_own_total(count, level):
    turnover = run_params()
    plans = plan_shards(turnover, count, target=TARGET)
    levels = shard_levels(turnover, plans, level)
    assert sum(lv.target_rps or 0 for lv in levels) == 5.5 * level
    assert all(lv.multiplier == 1.0 for lv in levels)
    closed = RunParams(population={"kind": "closed", "sessions": 40})
    plans = plan_shards(closed, count, target=TARGET)
    levels = shard_levels(closed, plans, level)
    applied = [
        round(p.params.population.sessions * lv.multiplier)
        for p, lv in zip(plans, levels, strict=True)
    ]
    assert sum(applied) == round(40 * level)  # ClosedPopulation.set_level's own total


def test_actor_prefixes_never_make_one_name_for_two_shards():
    plans = plan_shards(run_params(sessions=200), 12, target=TARGET)
    names = [f"{p.actor_prefix}-{sid}" for p in plans for sid in range(200)]
    assert len(set(names)) == len(names)
    listed = {p.actor_prefix + "-" for p in plans}
    # A lost shard's sweep selects by "<prefix>-": shard 1 never takes shard 10's actors.
    assert not any(a != b and b.startswith(a) for a in listed for b in listed)


def schedule(plan, sessions: int = 5, draws: int = 20) -> list[list[int]]:
    """What a shard's seeded streams intend: think jitter and turn arrival gaps per session."""
    seed = plan.params.seed
    out = []
    for sid in range(sessions):
        think = stream(seed, "session", sid, "think")
        arrivals = stream(seed, "session", sid, "arrivals")
        out.append(
            [int(1e9 * think_jitter(think)) for _ in range(draws)]
            + [poisson_gap_ns(arrivals, 2.0) for _ in range(draws)]
        )
    return out


@pytest.mark.parametrize("count", range(1, 9))
def test_the_same_seed_and_k_give_the_same_schedule(count):
    first = plan_shards(run_params(), count, target=TARGET)
    again = plan_shards(run_params(), count, target=TARGET)
    assert [schedule(p) for p in first] == [schedule(p) for p in again]
    assert len({p.params.seed for p in first}) == count  # each shard its own stream
    other_seed = plan_shards(RunParams(seed=12, population={"sessions": 100}), count, target={})
    assert {p.params.seed for p in other_seed}.isdisjoint({p.params.seed for p in first})
    if count > 1:
        other_k = plan_shards(run_params(), count - 1, target=TARGET)
        assert {p.params.seed for p in other_k}.isdisjoint({p.params.seed for p in first})


# ---------------------------------------------------------------- parameters
def test_generator_parameters_parse_and_refuse():
    assert RunParams().generator.shards == 1 and RunParams().generator.cluster is None
    params = parse(RunParams, {"generator": {"shards": "3", "cluster": "tcp://10.1.2.3:8786"}})
    assert params.generator.shards == 3 and params.generator.cluster == "tcp://10.1.2.3:8786"
    assert parse(RunParams, {"generator": {"shards": "auto"}}).generator.shards == "auto"
    for bad, says in [
        ({"generator": {"shards": 0}}, "between 1 and 1024"),
        ({"generator": {"shards": "two"}}, "or auto"),
        ({"generator": {"cluster": "http://x:1"}}, "scheduler address"),
        ({"generator": {"shards": 11}}, "exceeds population.sessions (10)"),
    ]:
        with pytest.raises(UsageError, match=re.escape(says)):
            parse(RunParams, bad)


def test_one_shard_is_todays_run_without_dask(tmp_path):
    from agentsession_core.engine.local_load import LocalLoad
    from agentsession_core.run.run import Run

    params = RunParams(out=str(tmp_path))
    assert not is_sharded(params)
    assert type(Run(params, handle_signals=False).load) is LocalLoad
    assert shard_count(params.generator, 10, cores=2) == 1
    auto = parse(RunParams, {"generator": {"shards": "auto"}})
    assert shard_count(auto.generator, 10, cores=4) == 4
    assert shard_count(auto.generator, 3, cores=4) == 3  # never more shards than sessions
    assert is_sharded(parse(RunParams, {"generator": {"cluster": "tcp://h:8786"}}))


def test_a_sharded_run_needs_a_substrate_url_not_an_object(tmp_path):
    from agentsession_core.run.run import Run
    from agentsession_core.substrate.fake import FakeSubstrate

    params = parse(RunParams, {"generator": {"shards": 2}, "out": str(tmp_path)})
    with pytest.raises(UsageError, match=r"target\.substrate"):
        Run(params, substrate=FakeSubstrate())


# ---------------------------------------------------------------- the merged stream
def make_recorder() -> Recorder:
    return Recorder(clock_ns=lambda: MONO0, wall_clock=lambda: WALL0)


def exact_quantile(values, q):
    s = sorted(values)
    return s[max(1, math.ceil(Fraction(str(q)) * len(s))) - 1]


def book(rec: Recorder, rng, seconds: int, per_second: int, samples: list[float]) -> None:
    row = rec.row("http", "Step_a")
    for s in range(seconds):
        for _ in range(per_second):
            done = MONO0 + s * NS_PER_S + int(rng.integers(0, NS_PER_S))
            response = int(rng.lognormal(16, 1))
            row.ok(done - response, done - response, done)
            samples.append(response / 1e6)
    rec.row(*LOOP_LAG_ROW).ok(MONO0, MONO0, MONO0)
    rec.gauge(CPU_GAUGE, {}, 40.0)
    rec.gauge("sessions", {"state": "idle"}, 3)


def delta_of(rec: Recorder, until_ns: int) -> ShardDelta:
    """What a shard ships: its closed seconds, then dropped (ShardEngine.ship)."""
    rec.flush(until_ns)
    intervals, rec.intervals = rec.intervals, {}
    gauges, rec.gauges = rec.gauges, {}
    return ShardDelta(intervals=intervals, gauges=gauges, closed_until=rec.closed_until)


def test_merged_windows_are_the_shards_samples_merged():
    """Three shards' per-second histograms merge into windows whose counts are the exact
    sum and whose percentiles are those of all raw samples together (within the histogram's
    1 % error) — and bucket for bucket those of one recorder that saw every sample."""
    rng = np.random.default_rng(3)
    merged = Recorder(clock_ns=lambda: MONO0, wall_clock=lambda: WALL0)
    flow = ShardStream(3)
    merged._clock_ns = flow.clock_ns  # the watermark clock, as ShardedLoad sets it up
    flow.attach(merged)
    shards = [make_recorder() for _ in range(3)]
    single = make_recorder()
    samples: list[float] = []
    for k, rec in enumerate(shards):
        mine: list[float] = []
        book(rec, rng, seconds=6, per_second=150 + 50 * k, samples=mine)
        for value in mine:  # the same samples, one recorder
            ns = int(value * 1e6)
            single.row("http", "Step_a").ok(MONO0 - ns, MONO0 - ns, MONO0)
        samples += mine
    end = MONO0 + 6 * NS_PER_S
    for k, rec in enumerate(shards[:2]):
        flow.add(k, delta_of(rec, end))
    assert flow.merged_until == merged.first_second  # shard 2 has not delivered: nothing yet
    flow.add(2, delta_of(shards[2], end))
    first = merged.second_of(MONO0)
    assert flow.merged_until == first + 6
    window = merged.window_seconds(first, first + 6)
    step = window.row("http", "Step_a")
    assert step.count == len(samples) == sum(150 + 50 * k for k in range(3)) * 6
    for q in (0.5, 0.9, 0.99, 0.999):
        exact = exact_quantile(samples, q)
        assert step.response.quantile(q) == pytest.approx(exact, rel=0.01), q
    single.flush(MONO0 + NS_PER_S)
    alone = single.window_seconds(first, first + 1).row("http", "Step_a").response
    assert alone.count == step.response.count
    assert np.array_equal(alone._counts, step.response._counts)
    # Gauges add up across shards; per-process CPU is judged per shard, never summed.
    idle = [v for _, labels, n, v in window.gauges if n == "sessions"]
    assert idle and set(idle) == {9.0}
    health = MergedHealth(flow, merged)
    assert health.void_reason(window) is None
    flow.mirrors[1].gauges[first + 2] = {(CPU_GAUGE, ()): 99.0}
    assert health.void_reason(window).startswith("shard 1: the load generator was saturated")


def test_a_late_shard_holds_the_merged_clock_and_a_lost_one_does_not():
    merged = make_recorder()
    flow = ShardStream(2)
    merged._clock_ns = flow.clock_ns
    flow.attach(merged)
    a, b = make_recorder(), make_recorder()
    rng = np.random.default_rng(4)
    book(a, rng, 4, 10, [])
    book(b, rng, 4, 10, [])
    first = merged.second_of(MONO0)
    flow.add(0, delta_of(a, MONO0 + 4 * NS_PER_S))
    flow.add(1, delta_of(b, MONO0 + 2 * NS_PER_S))
    assert flow.watermark == first + 2
    assert merged.second_of(merged.now_ns()) == first + 2  # the clock is the watermark
    flow.drop(1)
    assert flow.merged_until == first + 4
    assert merged.window_seconds(first, first + 4).row("http", "Step_a").count == 60


def test_the_journal_tells_the_coordinator_every_name_before_it_exists():
    ledger = JournalLedger("a")
    ledger.creating("agent-s0-1")
    ledger.created_actor("agent-s0-1")
    ledger.creating("agent-s0-2")
    ledger.not_created("agent-s0-2")
    ledger.creating("agent-s0-3")
    ledger.deleted_actor("agent-s0-1")
    flow = ShardStream(1)
    flow.add(0, ShardDelta(journal=ledger.take()))
    assert flow.names[0] == {"agent-s0-3"}
    assert ledger.take() == []


# ---------------------------------------------------------------- a lost shard's load goes on
@pytest.mark.parametrize("survivors", [1, 2, 3, 7])
def test_a_lost_shards_sessions_split_over_the_survivors_keep_their_ids_and_seed(survivors):
    params = run_params(sessions=23, awake=9, target_rps=4.5)
    lost = plan_shards(params, 4, target=TARGET)[2]
    parts = replan(lost, survivors, first_index=4)
    pops = [p.params.population for p in parts]
    lost_pop = lost.params.population
    assert [p.index for p in parts] == list(range(4, 4 + len(parts)))
    assert sum(p.sessions for p in pops) == lost_pop.sessions
    assert sum(p.awake for p in pops) == lost_pop.awake
    assert sum(p.target_rps for p in pops) == lost_pop.target_rps
    assert {p.params.seed for p in parts} == {lost.params.seed}  # each session's own streams
    assert {p.actor_prefix for p in parts} == {lost.actor_prefix}
    assert all(p.adopted_from == 2 for p in parts)
    # The parts' session ids are the lost shard's, each exactly once.
    ids = [
        i
        for p in parts
        for i in range(p.first_session, p.first_session + p.params.population.sessions)
    ]
    assert ids == list(range(lost_pop.sessions))
    for part in parts:  # each part owns its ids' actors (and replacements), nobody else's
        first, n = part.first_session, part.params.population.sessions
        assert part.owns(f"agent-s2-{first}") and part.owns(f"agent-s2-{first + n - 1}-r3")
        assert not part.owns(f"agent-s2-{first + n}") and not part.owns(f"agent-s1-{first}")
        assert not part.owns(f"agent-s20-{first}")
    assert lost.owns("agent-s2-999") and not lost.owns("agent-s20-1")


def test_levels_after_a_loss_still_add_up_to_the_levels_total():
    params = run_params(sessions=40, awake=8, target_rps=6.0)
    plans = plan_shards(params, 3, target=TARGET)
    live = [plans[0], plans[2], *replan(plans[1], 2, first_index=3)]
    levels = shard_levels(params, live, 1.5)
    assert sum(level.target_rps or 0 for level in levels) == pytest.approx(9.0)
    closed = RunParams(seed=11, population={"kind": "closed", "sessions": 40})
    plans = plan_shards(closed, 3, target=TARGET)
    live = [plans[0], plans[2], *replan(plans[1], 2, first_index=3)]
    levels = shard_levels(closed, live, 0.5)
    sessions = [
        lv.multiplier * p.params.population.sessions for lv, p in zip(levels, live, strict=True)
    ]
    assert round(sum(sessions)) == 20


def test_min_shards_defaults_to_half_and_is_refused_above_shards():
    assert GeneratorParams(shards=2).shards_needed(2) == 1
    assert GeneratorParams(shards=5).shards_needed(5) == 3
    assert GeneratorParams(shards=4, min_shards=4).shards_needed(4) == 4
    with pytest.raises(ValueError, match=r"generator.min_shards \(3\) exceeds generator.shards"):
        GeneratorParams(shards=2, min_shards=3)
    with pytest.raises(ValueError, match="min_shards"):
        GeneratorParams(shards=2, min_shards=0)


def test_a_shard_added_late_holds_the_watermark_only_once_it_delivers():
    merged = make_recorder()
    flow = ShardStream(1)
    merged._clock_ns = flow.clock_ns
    flow.attach(merged)
    a, late = make_recorder(), make_recorder()
    rng = np.random.default_rng(5)
    book(a, rng, 4, 10, [])
    first = merged.second_of(MONO0)
    flow.add(0, delta_of(a, MONO0 + 2 * NS_PER_S))
    added = flow.grow()
    assert added == 1 and flow.count == 2
    flow.add(0, delta_of(a, MONO0 + 3 * NS_PER_S))
    assert flow.merged_until == first + 3  # not held back by a shard still starting
    book(late, rng, 4, 10, [])
    flow.add(1, delta_of(late, MONO0 + 2 * NS_PER_S))  # it delivers: it holds from now on
    assert flow.watermark == first + 2 and flow.merged_until == first + 3
    flow.add(0, delta_of(a, MONO0 + 4 * NS_PER_S))
    assert flow.merged_until == first + 3
    flow.add(1, delta_of(late, MONO0 + 4 * NS_PER_S))
    assert flow.merged_until == first + 4
    # Nothing lost or counted twice: both shards' samples, the late one's first seconds too.
    assert merged.window_seconds(first, first + 4).row("http", "Step_a").count == 80


def test_a_loss_voids_the_windows_it_overlaps_by_name():
    flow = ShardStream(2)
    loss = Loss(1, at=WALL0 + 10.4, reason="shard 1 lost at 22:13:30 UTC (worker w1): gone")
    flow.losses.append(loss)
    health = MergedHealth(flow, make_recorder())

    def window(start: float, end: float) -> Window:
        return Window(WALL0 + start, WALL0 + end, {})

    assert health.void_reason(window(0, 10)) is None
    assert health.void_reason(window(10, 20)) == loss.reason  # not carried on yet
    assert health.void_reason(window(30, 40)) == loss.reason
    loss.back, loss.carried_by = WALL0 + 14.0, [2, 3]
    assert health.void_reason(window(10, 20)).endswith(
        "carried on by shards 2, 3 from 22:13:34 UTC"
    )
    assert health.void_reason(window(14, 20)) is None  # the full load again: judged
    assert health.void_reason(window(0, 10)) is None
