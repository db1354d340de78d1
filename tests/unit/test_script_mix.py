"""A mix of scripts (docs/SPEC.md §1.6): exact shares (a property over any weights and
counts), the seeded assignment, the shards' deal, the swap dealer, the `script` value's forms
and refusals, the rows named per script, and a turnover over the in-memory FakeSubstrate
whose residents, swaps and rows follow the mix."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.params import RunParams, parse_params
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.script_mix import Dealer, assign, counts, parts_of, shares
from agentsession_core.engine.shards.split import plan_shards, split_int
from agentsession_core.errors import UsageError
from agentsession_core.judge.conditions import conditions, differences
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import evaluate, headline, matches, select
from agentsession_core.measure.health import HEALTH_KIND
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import LOAD_KINDS, row_script
from agentsession_core.script import ScriptError, decode, encode, load_script
from agentsession_core.script.mix import ScriptMix, load_mix
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import Template
from agentsession_core.substrate.op_limits import OpLimits

weights_st = st.lists(st.integers(1, 50), min_size=1, max_size=8)


# ------------------------------------------------------------------ exact shares
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(total=st.integers(0, 5000), weights=weights_st)
def test_shares_add_up_and_each_is_within_one_of_its_quota(total: int, weights: list[int]):
    got = shares(total, weights)
    assert sum(got) == total
    for share, weight in zip(got, weights, strict=True):
        quota = Fraction(total * weight, sum(weights))
        assert abs(share - quota) < 1
        if quota.denominator == 1:  # an exact quota is met exactly: 3:1 of 8 is 6 and 2
            assert share == quota


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.integers(1, 400),
    awake_share=st.floats(0, 1),
    weights=weights_st,
    seed=st.integers(0, 2**32),
)
def test_assignment_is_exact_and_seeded(
    sessions: int, awake_share: float, weights: list[int], seed: int
):
    awake = int(sessions * awake_share)
    labels = assign(seed, sessions, awake, weights)
    everyone = counts(labels, len(weights))
    assert everyone == shares(sessions, weights)
    residents = counts(labels[:awake], len(weights))
    assert residents == shares(awake, everyone)
    assert all(r <= n for r, n in zip(residents, everyone, strict=True))
    assert assign(seed, sessions, awake, weights) == labels  # same seed, same assignment


def test_the_seed_decides_the_order_not_the_shares():
    one, two = assign(1, 400, 100, [3, 1]), assign(2, 400, 100, [3, 1])
    assert one != two
    assert counts(one, 2) == counts(two, 2) == [300, 100]
    assert counts(one[:100], 2) == counts(two[:100], 2) == [75, 25]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.integers(2, 120),
    awake_share=st.floats(0, 1),
    shards=st.integers(1, 8),
    weights=st.lists(st.integers(1, 9), min_size=2, max_size=4),
)
def test_shards_keep_the_mix_exact(
    sessions: int, awake_share: float, shards: int, weights: list[int]
):
    shards = min(shards, sessions)
    awake = int(sessions * awake_share)
    spec = {name: w for name, w in zip(["a", "b", "c", "d"], weights, strict=False)}
    params = RunParams.model_validate(
        {
            "script": spec,
            "seed": 3,
            "population": {"kind": "turnover", "sessions": sessions, "awake": awake},
        }
    )
    plans = plan_shards(params, shards, target={})
    run = assign(3, sessions, awake, weights)
    mixed = [0] * len(weights)
    residents = [0] * len(weights)
    for plan in plans:
        assert plan.labels is not None
        assert len(plan.labels) == plan.params.population.sessions
        mine = plan.params.population.awake
        assert mine == split_int(awake, shards)[plan.index]
        for i, n in enumerate(counts(plan.labels, len(weights))):
            mixed[i] += n
        for i, n in enumerate(counts(plan.labels[:mine], len(weights))):
            residents[i] += n
    assert mixed == counts(run, len(weights)) == shares(sessions, weights)
    assert residents == counts(run[:awake], len(weights))


def test_a_run_of_one_script_deals_no_labels():
    params = RunParams.model_validate({"script": "smoke", "population": {"sessions": 4}})
    assert all(plan.labels is None for plan in plan_shards(params, 2, target={}))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weights=weights_st, rounds=st.integers(1, 4))
def test_the_dealer_is_exact_over_every_cycle(weights: list[int], rounds: int):
    dealer = Dealer(weights)
    dealt = [dealer.next() for _ in range(sum(weights) * rounds)]
    assert counts(dealt, len(weights)) == [w * rounds for w in weights]


def test_the_dealer_spreads_its_turns():
    dealer = Dealer([3, 1])
    assert [dealer.next() for _ in range(8)] == [0, 0, 1, 0, 0, 0, 1, 0]


# ------------------------------------------------------------------ the `script` value
@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("coding-session", "coding-session"),
        ({"smoke": 3, "coding-session": 1}, {"smoke": 3, "coding-session": 1}),
        ("{smoke: 3, coding-session: 1}", {"smoke": 3, "coding-session": 1}),  # a flag's text
        ({"smoke": 5}, "smoke"),  # a mix of one is that script: plain rows
    ],
)
def test_script_takes_a_name_or_a_mix(value, kept):
    assert RunParams.model_validate({"script": value}).script == kept


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"smoke": 0, "coding-session": 1}, 'mix entry "smoke": weight 0 must be 1 to'),
        ({"smoke": 1.5, "coding-session": 1}, 'mix entry "smoke": weight float 1.5 is not'),
        ({"smoke": "3", "coding-session": 1}, 'mix entry "smoke": weight "3" is not a whole'),
        ({"smoke": True, "coding-session": 1}, 'mix entry "smoke": weight bool True is not'),
        ({}, "an empty mix"),
        ("{smoke: 3", "is not a mapping of script to weight"),
        (["smoke"], "a list: a script name or path, or a mapping"),
        ({f"s{i}": 1 for i in range(17)}, "17 scripts in a mix: at most 16"),
    ],
)
def test_a_bad_mix_is_refused_in_one_line_naming_the_entry(value, message):
    with pytest.raises(UsageError) as refused:
        parse_params({"script": value})
    text = str(refused.value)
    assert text.startswith("parameter script: ") and message in text
    assert len(text.splitlines()) == 1


def test_a_mix_entry_that_is_no_script_is_named():
    with pytest.raises(ScriptError, match=r"^no-such: file: no such file, and not a built-in"):
        load_mix({"smoke": 1, "no-such": 2})


def test_the_same_script_twice_is_refused(tmp_path):
    copy = tmp_path / "again.yaml"
    copy.write_text(_smoke_yaml())
    with pytest.raises(ScriptError) as refused:
        load_mix({"smoke": 1, str(copy): 1})
    assert str(refused.value).startswith(f'{copy}: name: script "smoke" is also mix entry')


def _smoke_yaml() -> str:
    return encode(load_script("smoke"))


def test_a_step_name_may_not_hold_a_slash():
    text = _smoke_yaml().replace("name: 01_start", "name: 01/start")
    with pytest.raises(ScriptError, match=r"step 1 \(\"01/start\"\): name \"01/start\" has a '/'"):
        decode(text, "t.yaml")


def test_the_mix_goes_to_a_shard_and_back():
    mix = load_mix({"smoke": 3, "personal-assistant-light": 1})
    again = ScriptMix.decode(mix.encode(), "shard 0 script")
    assert again == mix and again.weight_of() == {"smoke": 3, "personal-assistant-light": 1}


def test_conditions_compare_the_mix_in_lowest_terms():
    run = conditions({"script": {"smoke": 6, "coding-session": 2}})
    assert differences(run, conditions({"script": {"coding-session": 1, "smoke": 3}})) == []
    assert differences(run, conditions({"script": "smoke"})) == [
        "script: 'smoke' → {'coding-session': 1, 'smoke': 3}"
    ]


# ------------------------------------------------------------------ rows per script
def test_one_script_keeps_its_row_names():
    (part,) = parts_of(ScriptMix.of(load_script("smoke")))
    assert part.step_rows[0] == "Step_01_start" and part.time_to_wake is None


def test_a_mix_names_each_scripts_rows():
    smoke, light = parts_of(load_mix({"smoke": 3, "personal-assistant-light": 1}))
    assert smoke.step_rows[0] == "Step_01_start/smoke"
    assert light.step_rows[-1] == "Step_10_tidy_memory/personal-assistant-light"
    assert light.time_to_wake == ("rps", "TimeToWake/personal-assistant-light")
    assert row_script("Step_01_start/smoke") == ("Step_01_start", "smoke")
    assert row_script("TimeToWake") == ("TimeToWake", None)


def test_selectors_pick_one_script_and_never_count_a_wake_twice():
    overall, mine = ("rps", "TimeToWake"), ("rps", "TimeToWake/smoke")
    step = ("http", "Step_01_start/smoke")
    assert matches(mine, "TimeToWake/smoke") and matches(mine, "rps_TimeToWake/*")
    assert matches(step, "Step_*") and matches(step, "Step_*/smoke") and matches(step, "*/smoke")
    assert not matches(step, "Step_*/other")
    # A per-script wake is the overall row's sample again: only a script pattern takes it.
    assert not matches(mine, "rps_*") and not matches(mine, "TimeToWake*")
    assert matches(overall, "rps_*")
    rule = parse_threshold("Step_*/personal-assistant-light: failure_ratio < 1%")
    assert rule.rows == "Step_*/personal-assistant-light"


# ------------------------------------------------------------------ a turnover of a mix
def mixed_engine(tmp_path: Path) -> Engine:
    """16 sessions 3:1 of smoke and a copy of it named smoke-b (equal steps, so the swaps
    the dealer gives each script find an idle resident of it), 8 awake, a swap a tick."""
    other = tmp_path / "smoke-b.yaml"
    other.write_text(_smoke_yaml().replace("name: smoke", "name: smoke-b", 1))
    spec = {"smoke": 3, str(other): 1}
    params = RunParams(
        script=spec,
        seed=11,
        population={
            "kind": "turnover",
            "sessions": 16,
            "awake": 8,
            "target_rps": 10,
            "registration_quiet_seconds": 0,
            "spawn_rate": 1000,
        },
        target={"local_workers": 16},
        cleanup={"stop_grace_seconds": 2},
    )
    return Engine(params, FakeSubstrate(), load_mix(spec), Recorder(), atespace="unit")


async def test_a_mixed_turnover_keeps_each_scripts_residents_and_swaps(tmp_path: Path):
    engine = mixed_engine(tmp_path)
    population = engine.population
    assert isinstance(population, TurnoverPopulation)
    await engine.preflight()
    await engine.register()
    scripts = [s.part.script.name for s in population.sessions]
    assert scripts.count("smoke") == 12 and scripts.count("smoke-b") == 4
    assert population.quota == [6, 2]
    await engine.fill()
    assert population.claimed_by_script() == [6, 2]
    # 25 ticks of one swap, by hand, each run to its end before the next: as ticks 100 ms
    # apart find them on a quiet machine, and on any machine here (a late loop's ticks come
    # at once, before the last tick's woken sessions are idle again).
    for task in [t for t in population._tasks if t.get_name() == "turnover-ticks"]:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for _ in range(25):
        population.tick(now_ns(), 1)
        assert sum(population.claimed_by_script()) <= 8
        pending = [t for t in population._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending)
        assert sum(population.claimed_by_script()) <= 8
    await engine.stop()
    assert population.claimed_by_script() == [6, 2]
    totals = engine.recorder.totals()
    wakes = {n: totals.row("rps", f"TimeToWake/{n}").count for n in ("smoke", "smoke-b")}
    # Every wake is booked once overall and once for its script; fill and swaps go 3:1 (the
    # dealer's cycles of 8 swaps are exact; the last cycle may be cut short by the stop).
    assert sum(wakes.values()) == totals.row("rps", "TimeToWake").count
    assert population.swaps_started >= 20 and totals.row("turnover", "Backlog").events == 0
    assert abs(wakes["smoke"] - 3 * wakes["smoke-b"]) <= 6
    assert wakes["smoke-b"] >= 2 + population.swaps_started // 4 - 1
    sections = headline(totals)
    assert {"TimeToWake/smoke", "Step_*/smoke", "TimeToWake/smoke-b", "Step_*/smoke-b"} <= set(
        sections
    )
    assert sections["TimeToWake/smoke-b"]["count"] == wakes["smoke-b"]
    # "All requests" counts each wake once: the per-script copies stay out of the total.
    copies = select(totals, "TimeToWake/*").count
    assert copies == totals.row("rps", "TimeToWake").count > 0
    booked = sum(s.count for k, s in totals.rows.items() if k[0] not in (HEALTH_KIND, *LOAD_KINDS))
    assert select(totals, None).count == booked - copies
    rule = parse_threshold("TimeToWake/smoke-b: count >= 1")
    assert evaluate(rule, totals, None).samples == wakes["smoke-b"]
    assert await engine.cleanup() == []


async def test_preflight_checks_the_mix_s_largest_script():
    spec = {"smoke": 1, "coding-session": 1}
    params = RunParams(script=spec, population={"sessions": 2})

    class SmallTemplate(FakeSubstrate):
        async def get_template(self, namespace: str, name: str) -> Template:
            return Template(namespace, name, 512 << 20)

    engine = Engine(params, SmallTemplate(), load_mix(spec), Recorder(), atespace="unit")
    with pytest.raises(PreflightError, match="below script coding-session's min_actor_memory 1Gi"):
        await engine.preflight()


async def test_preflight_checks_every_script_of_the_mix_against_the_caps():
    spec = {"smoke": 3, "personal-assistant-light": 1}  # the second fills 24Mi in one op
    params = RunParams(script=spec, population={"sessions": 2})

    class SmallCaps(FakeSubstrate):
        async def get_template(self, namespace: str, name: str) -> Template:
            return Template(namespace, name, 1 << 30, OpLimits(max_op_bytes=8 << 20))

    engine = Engine(params, SmallCaps(), load_mix(spec), Recorder(), atespace="unit")
    with pytest.raises(PreflightError) as refused:
        await engine.preflight()
    assert str(refused.value).startswith(
        "script personal-assistant-light step 01_hourly_heartbeat op 1 fill_ram size 24Mi is "
        "above the target's per-op cap of 8Mi"
    )
