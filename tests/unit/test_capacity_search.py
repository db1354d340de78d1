"""The capacity search's decisions (campaign/search.py), its parameters, gate.json's
capacity and its comparison with a baseline (docs/SPEC.md §6.7)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.search import (
    NextProbe,
    Probe,
    SearchEnd,
    SearchPlan,
    decide,
    most_probes,
)
from agentsession_core.engine.params import parse
from agentsession_core.errors import UsageError
from agentsession_core.judge.compare import compare_capacity
from agentsession_core.judge.gate import gate_document, with_baseline
from agentsession_core.judge.gate_document import GateDocument, GateInputError
from agentsession_core.judge.stored_run import StoredRun

PLAN = SearchPlan(start=2.0, factor=2.0, resolution=0.1, max_level=16.0)


def search_against(
    knee: float,
    plan: SearchPlan = PLAN,
    anchor: float = 1.0,
    confirm_knee: float | None = None,
) -> tuple[SearchEnd, list[Probe]]:
    """Run the decisions against a substrate that holds every level below `knee`; after
    the search converged (its confirmation and step down), every level below
    `confirm_knee` (default: `knee`): a substrate that got worse while it was searched."""
    probes: list[Probe] = []
    for _ in range(100):
        step = decide(plan, anchor, probes)
        if isinstance(step, SearchEnd):
            return step, probes
        limit = knee if step.stage == "search" or confirm_knee is None else confirm_knee
        probes.append(Probe(step.level, "held" if step.level < limit else "broke", step.stage))
    raise AssertionError("the search did not end")


def test_the_search_grows_by_its_factor_then_bisects() -> None:
    end, probes = search_against(5.0)
    assert [p.level for p in probes[:3]] == [2.0, 4.0, 8.0]
    assert [p.level for p in probes[3:5]] == [6.0, 5.0]  # between 4 (held) and 8 (broke)
    assert end.status == "found" and end.confirmed is True
    assert end.capacity is not None and end.broke_at is not None
    assert end.broke_at - end.capacity <= PLAN.resolution * end.capacity + 1e-9
    assert end.capacity < 5.0 <= end.broke_at


@pytest.mark.parametrize("knee", [1.3, 2.5, 3.1, 7.9, 11.0, 15.5])
def test_the_capacity_is_within_resolution_below_the_knee(knee: float) -> None:
    end, probes = search_against(knee)
    assert end.status == "found" and end.capacity is not None
    assert end.capacity < knee <= end.capacity * (1 + PLAN.resolution) + 1e-9
    assert len(probes) <= most_probes(PLAN, anchor=1.0)
    assert max(p.level for p in probes) <= PLAN.max_level


def test_a_search_that_never_breaks_stops_at_max_level() -> None:
    end, probes = search_against(math.inf, SearchPlan(2.0, 3.0, 0.1, 10.0))
    assert [p.level for p in probes] == [2.0, 6.0, 10.0]  # never past max_level
    assert end.status == "above" and end.broke_at is None
    assert end.confirmed is None  # nothing converged: nothing to confirm


def test_a_first_probe_that_breaks_bisects_down_to_the_held_first_level() -> None:
    end, probes = search_against(1.5)
    assert probes[0] == Probe(2.0, "broke")
    assert probes[1].level == 1.5
    assert end.status == "found" and end.capacity is not None and end.capacity >= 1.0


def test_a_broken_level_below_the_held_anchor_has_nothing_held_beneath() -> None:
    plan = SearchPlan(start=0.5, factor=2.0, resolution=0.1, max_level=4.0)
    end = decide(plan, 1.0, [Probe(0.5, "broke")])
    assert isinstance(end, SearchEnd) and end.status == "below" and end.capacity is None


@pytest.mark.parametrize("outcome", ["void", "aborted"])
def test_a_void_or_aborted_probe_ends_the_search_at_the_last_held(outcome: str) -> None:
    probes = [Probe(2.0, "held"), Probe(4.0, outcome)]  # type: ignore[arg-type]
    end = decide(PLAN, 1.0, probes)
    assert isinstance(end, SearchEnd)
    assert end.status == outcome and end.capacity == 2.0


def test_whole_loads_end_the_bisection_when_no_count_lies_between() -> None:
    # awake 2: round(2 × level) residents; 4 holds, 5 does not.
    load: Callable[[float], float] = lambda level: float(round(2 * level))  # noqa: E731
    plan = SearchPlan(start=2.0, factor=2.0, resolution=0.01, max_level=3.0, load_of=load)
    probes: list[Probe] = []
    while not isinstance(step := decide(plan, 1.0, probes), SearchEnd):
        probes.append(Probe(step.level, "held" if load(step.level) <= 4 else "broke", step.stage))
    assert step.status == "found" and step.capacity is not None and step.confirmed is True
    assert load(step.capacity) == 4 and step.broke_at is not None and load(step.broke_at) == 5
    assert len(probes) <= 5  # the last one the confirmation
    assert probes[-1].stage == "confirm" and load(probes[-1].level) == 4


# --------------------------------------------------------------------------- confirmation
def test_a_converged_search_holds_the_found_level_again_before_it_ends() -> None:
    end, probes = search_against(5.0)
    searched = [p for p in probes if p.stage == "search"]
    assert probes[-1] == Probe(end.capacity or 0.0, "held", "confirm")
    assert probes[:-1] == searched  # one confirmation, last, and no step down
    assert end.capacity == max(p.level for p in searched if p.outcome == "held")
    assert "confirmed" in end.why


def test_a_broken_confirmation_steps_down_once_by_the_resolution() -> None:
    # Holds below 4.1 while searched (found 4x, the growth's: 4.25 broke), then only below
    # 3.9: the confirmation at 4 breaks and the step down probes 4 × 0.9 = 3.6, which holds.
    end, probes = search_against(4.1, confirm_knee=3.9)
    confirm, step = probes[-2:]
    assert confirm == Probe(4.0, "broke", "confirm")
    assert step.stage == "step-down" and step.outcome == "held"
    assert step.level == pytest.approx(4.0 * (1 - PLAN.resolution))
    assert end.status == "found" and end.confirmed is False
    assert end.capacity == step.level and end.broke_at == 4.0
    assert "the confirmation at 4x broke" in end.why and "stepped down once to 3.6x" in end.why


def test_a_broken_confirmation_steps_down_onto_a_level_the_bisection_held() -> None:
    # Found 4.75 (4.5 held below it): its confirmation breaks, and 4.5 lies within one
    # resolution below: the capacity, with no further probe.
    end, probes = search_against(5.0, confirm_knee=4.6)
    assert probes[-1] == Probe(4.75, "broke", "confirm")
    assert end.status == "found" and end.confirmed is False
    assert end.capacity == 4.5 and end.broke_at == 4.75
    assert "held already: not held a second time" in end.why


def test_a_step_down_onto_a_level_already_held_is_not_held_again() -> None:
    # Resolution 0.5: 4 held, 8 and 6 broke, found 4 (6 − 4 within 0.5 × 4). Its
    # confirmation breaks; the step down, 4 × 0.5 = 2, is a level the search held: no probe.
    plan = SearchPlan(start=2.0, factor=2.0, resolution=0.5, max_level=16.0)
    probes = [Probe(2.0, "held"), Probe(4.0, "held"), Probe(8.0, "broke"), Probe(6.0, "broke")]
    step = decide(plan, 1.0, probes)
    assert step == NextProbe(4.0, "confirm")
    end = decide(plan, 1.0, [*probes, Probe(4.0, "broke", "confirm")])
    assert isinstance(end, SearchEnd) and end.status == "found" and end.confirmed is False
    assert end.capacity == 2.0 and end.broke_at == 4.0  # the held 2 ≥ the step's 2
    assert "stepped down once to 2x, held already: not held a second time" in end.why


def test_a_step_down_with_no_lower_count_lands_on_the_last_level_held() -> None:
    # awake 2: 3 residents (1.5x) is found and its confirmation breaks; 1.5 × 0.9 makes 3
    # residents again, so the step down is the last level held below: 2 residents, 1x.
    load: Callable[[float], float] = lambda level: float(round(2 * level))  # noqa: E731
    plan = SearchPlan(start=2.0, factor=2.0, resolution=0.1, max_level=3.0, load_of=load)
    probes = [Probe(2.0, "broke"), Probe(1.5, "held"), Probe(1.5, "broke", "confirm")]
    end = decide(plan, 1.0, probes)
    assert isinstance(end, SearchEnd) and end.status == "found" and end.confirmed is False
    assert end.capacity == 1.0 and end.broke_at == 1.5


def test_a_step_down_that_breaks_too_ends_at_the_last_level_held_below_it() -> None:
    end, probes = search_against(4.1, confirm_knee=3.5)
    assert [p.stage for p in probes[-2:]] == ["confirm", "step-down"]
    assert [p.outcome for p in probes[-2:]] == ["broke", "broke"]
    assert end.status == "found" and end.confirmed is False
    assert end.capacity == 2.0  # the search's held 2x: below the step down's 3.6x
    assert end.broke_at == probes[-1].level
    assert "broke too" in end.why
    assert sum(p.stage == "step-down" for p in probes) == 1  # once, never a second step


def test_a_void_confirmation_is_no_break_and_leaves_the_capacity_unconfirmed() -> None:
    probes = [Probe(2.0, "held"), Probe(4.0, "broke"), Probe(3.0, "held"), Probe(3.5, "held")]
    probes += [Probe(3.75, "broke")]
    step = decide(PLAN, 1.0, probes)
    assert step == NextProbe(3.5, "confirm")
    end = decide(PLAN, 1.0, [*probes, Probe(3.5, "void", "confirm")])
    assert isinstance(end, SearchEnd) and end.status == "found"
    assert end.capacity == 3.5 and end.broke_at == 3.75 and end.confirmed is None
    assert "void, not a break" in end.why


def test_a_confirmation_that_breaks_at_the_anchor_with_nothing_below_is_below() -> None:
    # The first probe broke and the bisection came back to the anchor: its confirmation
    # breaks and so does the step down below it.
    plan = SearchPlan(start=1.05, factor=2.0, resolution=0.1, max_level=4.0)
    probes = [Probe(1.05, "broke")]
    assert decide(plan, 1.0, probes) == NextProbe(1.0, "confirm")
    probes.append(Probe(1.0, "broke", "confirm"))
    step = decide(plan, 1.0, probes)
    assert step == NextProbe(pytest.approx(0.9), "step-down")  # type: ignore[arg-type]
    assert isinstance(step, NextProbe)
    end = decide(plan, 1.0, [*probes, Probe(step.level, "broke", "step-down")])
    assert isinstance(end, SearchEnd) and end.status == "below" and end.capacity is None


# --------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"factor": 1}, "search.factor"),
        ({"factor": 0.5}, "search.factor"),
        ({"resolution": 0}, "search.resolution"),
        ({"resolution": -0.1}, "search.resolution"),
        ({"start": 20, "max_level": 10}, "search"),
        ({"threshold": "TimeToWake: p99 <"}, "search.threshold"),
    ],
)
def test_bad_search_settings_are_refused_in_one_line_naming_the_field(
    search: dict[str, object], field: str
) -> None:
    with pytest.raises(UsageError) as caught:
        parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s", **search}})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"parameter {field}:"), message


@pytest.mark.parametrize(
    "search",
    [
        {"factor": 1.0001, "resolution": 1e-9},  # issue 29: about 20,800 probes, a week
        {"factor": 1.0001},
        {"resolution": 1e-300},
        {"factor": 1 + 1e-15, "resolution": 1e-300},
        {"window_seconds": 86_400, "settle_seconds": 3600},  # 10 probes of 25 h
    ],
    ids=["hostile", "tiny factor", "tiny resolution", "both at the edge", "long probes"],
)
def test_a_search_that_cannot_finish_in_its_time_bound_is_refused(
    search: dict[str, object],
) -> None:
    with pytest.raises(UsageError) as caught:
        parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s", **search}})
    line = str(caught.value)
    assert "\n" not in line and len(line) < 500, line
    assert line.startswith("parameter search: "), line
    # How many probes, how long, the bound and the fields to change.
    assert "probes" in line and " of " in line and "at most" in line, line
    for field in ("search.factor", "search.resolution", "search.window_seconds"):
        assert field in line, line


def test_the_search_bound_is_the_probe_formula_times_each_probes_time() -> None:
    from agentsession_core.campaign.bounds import MAX_PROBES, MAX_SEARCH_SECONDS

    # The defaults and the shipped presets' settings fit with room to spare.
    params = parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s"}})
    plan = SearchPlan(params.search_start, 2.0, 0.1, 16.0)
    assert most_probes(plan, 1.0) == 10  # 8 to converge, the confirmation, one step down
    assert params.search_seconds_at_most() == 10 * (30 + 600)
    # Just inside the bound is taken, just past it refused.
    per_probe = 30 + 600
    fits = MAX_SEARCH_SECONDS // per_probe
    assert fits < MAX_PROBES
    ok = {"threshold": "TimeToWake: p99 < 2s", "factor": 2, "max_level": 16}
    parse(CampaignParams, {"search": {**ok, "resolution": 0.1 / 2 ** (fits - 10 - 1)}})
    with pytest.raises(UsageError, match="make up to"):
        parse(CampaignParams, {"search": {**ok, "resolution": 0.1 / 2 ** (fits - 10 + 1)}})


def test_a_density_search_needs_a_turnover_and_parked_sessions() -> None:
    with pytest.raises(UsageError, match=r"search\.dimension awake"):
        parse(
            CampaignParams,
            {
                "population": {"kind": "closed"},
                "search": {"threshold": "WakeFirstTouch: p99 < 2s", "dimension": "awake"},
            },
        )
    with pytest.raises(UsageError, match=r"search\.max_level 10x makes 1000 residents"):
        parse(
            CampaignParams,
            {
                "search": {
                    "threshold": "TimeToWake: p99 < 2s",
                    "dimension": "awake",
                    "max_level": 10,
                }
            },
        )


def test_search_settings_come_from_set_paths_and_default_from_the_campaign() -> None:
    params = parse(
        CampaignParams,
        {"window_seconds": 60, "hold_minutes": 1, "search": {"threshold": "TimeToWake: p99 < 2s"}},
    )
    assert params.search_window_seconds == 60
    assert params.search_start == 2.0  # factor × the first level
    assert "search" in CampaignParams.model_json_schema()["properties"]
    from agentsession_core.engine.params_io import apply_settings

    values = apply_settings({}, ["search.threshold=TimeToWake: p99 < 1s", "search.factor=3"])
    searched = parse(CampaignParams, values)
    assert searched.search.threshold is not None and searched.search_start == 3.0
    assert searched.search.threshold.text == "TimeToWake: p99 < 1s"


# --------------------------------------------------------------------------- gate.json
def capacity(rate: float | None, broke: float | None = None, resolution: float = 0.1) -> dict:
    return {
        "status": "found" if rate else "above",
        "level": rate,
        "rate": rate,
        "broke_at_level": broke,
        "broke_at_rate": broke,
        "resolution": resolution,
        "unit": "swaps/s",
        "reason": "test",
        "probes": [{"level": 1.0}],
    }


def gate(cap: dict | None) -> dict:
    doc = gate_document([], abort_reason=None, run_status="completed", capacity=cap)
    # A passing hold: the document's own verdict decides nothing here.
    doc["windows"] = [{"index": 0, "outcome": "pass", "level": 1.0, "missed": []}]
    doc["verdict"], doc["reason"] = "pass", "1 window(s) passed"
    return doc


def model(doc: dict) -> GateDocument:
    return GateDocument.model_validate(doc)


def test_a_capacity_regression_beyond_both_brackets_fails_the_gate() -> None:
    now, base = gate(capacity(5.0, 5.4)), gate(capacity(10.0, 10.8))
    compared = with_baseline(now, StoredRun.of("base", base), 0.2, night_spread=0.0)
    metric = next(m for m in compared["baseline"]["metrics"] if m["metric"] == "capacity.rate")
    assert metric["status"] == "regressed"
    assert compared["verdict"] == "fail" and "capacity.rate" in compared["reason"]


def test_a_capacity_within_its_resolution_is_unchanged() -> None:
    # 9.5 vs 10: inside both brackets (±10 %), whatever the margin.
    metric = compare_capacity(
        model(gate(capacity(9.5, 10.4))),
        [model(gate(capacity(10.0, 10.9)))],
        night_spread=0.0,
        max_regression=0.0,
        confidence=0.99,
    )
    assert metric is not None and metric["status"] == "unchanged"


def test_the_run_to_run_spread_keeps_a_modest_fall_unchanged() -> None:
    metric = compare_capacity(
        model(gate(capacity(7.0, 7.5))),
        [model(gate(capacity(10.0, 10.8)))],
        night_spread=0.1,
        max_regression=0.2,
        confidence=0.99,
    )
    assert metric is not None and metric["status"] == "unchanged"


def test_a_fall_past_the_margin_is_regressed_when_significant_not_when_its_interval_spans() -> None:
    """-30 %: beyond the 20 % margin and known not to be noise (significant), though its
    interval reaches below the margin (whole-interval keeps it unchanged)."""
    judged = {
        rule: compare_capacity(
            model(gate(capacity(7.0, 7.5))),
            [model(gate(capacity(10.0, 10.8)))],
            night_spread=0.1,
            max_regression=0.2,
            confidence=0.99,
            rule=rule,
        )
        for rule in ("significant", "whole-interval")
    }
    assert {rule: m["status"] for rule, m in judged.items() if m} == {
        "significant": "regressed",
        "whole-interval": "unchanged",
    }


def test_a_side_with_no_capacity_is_inconclusive_and_no_search_is_no_metric() -> None:
    metric = compare_capacity(
        model(gate(capacity(None))),
        [model(gate(capacity(10.0, 10.8)))],
        night_spread=0.0,
        max_regression=0.2,
        confidence=0.99,
    )
    assert metric is not None and metric["status"] == "inconclusive"
    assert metric["why"].startswith("current:")
    assert (
        compare_capacity(
            model(gate(None)),
            [model(gate(None))],
            night_spread=0.1,
            max_regression=0.2,
            confidence=0.99,
        )
        is None
    )


def test_check_gate_reads_capacity_and_refuses_a_bad_one() -> None:
    doc = gate(capacity(5.0, 5.4))
    assert isinstance(GateDocument.read(doc, "here"), GateDocument)
    doc["capacity"]["rate"] = "fast"
    with pytest.raises(GateInputError, match=r"capacity\.rate"):
        GateDocument.read(doc, "here")


# --------------------------------------------------------------------------- the report
def knee_capacity() -> dict:
    probes = [
        {"level": 2.0, "rate": 2.0, "outcome": "held", "figure": 400.0, "missed": []},
        {"level": 4.0, "rate": 4.0, "outcome": "broke", "figure": 2600.0, "missed": ["SLO"]},
        {"level": 3.0, "rate": 3.0, "outcome": "held", "figure": 900.0, "missed": []},
        {"level": 3.5, "rate": 3.5, "outcome": "broke", "figure": 2100.0, "missed": ["SLO"]},
    ]
    return {
        **capacity(3.0, 3.5, resolution=0.2),
        "level": 3.0,
        "broke_at_level": 3.5,
        "threshold": "TimeToWake: p99 < 2s",
        "slo_value": 2000.0,
        "figure_unit": "ms",
        "dimension": "rate",
        "base_rate": 1.0,
        "anchor_level": 1.0,
        "probes": probes,
    }


def with_capacity(run_dir, cap: dict | None) -> None:
    import json

    path = run_dir / "gate.json"
    doc = json.loads(path.read_text())
    doc["capacity"] = cap
    path.write_text(json.dumps(doc))


def test_the_report_draws_the_knee_curve(tmp_path) -> None:
    from agentsession_core.report.page import render_report
    from tests.unit.report_run import build_run

    build_run(tmp_path)
    assert 'id="capacity"' not in render_report(tmp_path)  # no search, no section
    with_capacity(tmp_path, knee_capacity())
    page = render_report(tmp_path)
    assert '<section id="capacity">' in page and 'href="#capacity"' in page
    knee = page.split('<section id="capacity">')[1].split("</section>")[0]
    assert knee.count('r="5" fill="#2e7d32"') == 2  # held
    assert knee.count('r="5" fill="#c62828"') == 2  # broke
    assert "SLO 2000ms" in knee and "capacity 3x" in knee and "broke 3.5x" in knee
    assert ">3x<" in knee or "3x</text>" in knee  # a level axis, not a time axis
    assert "3 swaps/s (3x, ±20%)" in knee


def test_report_against_a_baseline_shows_both_capacities(tmp_path) -> None:
    from agentsession_core.report.compare import Comparison
    from agentsession_core.report.page import read_run, render
    from tests.unit.report_run import build_run

    this, base = tmp_path / "this", tmp_path / "base"
    for run_dir, cap in (
        (this, knee_capacity()),
        (base, {**knee_capacity(), "rate": 4.0, "level": 4.0}),
    ):
        run_dir.mkdir()
        build_run(run_dir)
        with_capacity(run_dir, cap)
    page = render(read_run(this), comparison=Comparison(read_run(base)))
    row = page.split("<th>capacity</th>")[1].split("</tr>")[0]
    assert "4 swaps/s (4x" in row and "3 swaps/s (3x" in row
    assert row.index("4 swaps/s") < row.index("3 swaps/s")  # baseline first, as every row


# --------------------------------------------------------------------------- the record
def verdict(index: int, level: float, outcome: str, void_reason: str | None = None):
    from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict

    slo = ThresholdResult("TimeToWake: p99 < 2s", 900.0, 40, outcome == "pass", "")
    return WindowVerdict(
        index,
        level,
        0.0,
        1.0,
        outcome,
        [slo],
        void_reason=void_reason,  # type: ignore[arg-type]
    )


def recorded_search(*probes: tuple[float, str, str | None]) -> dict:
    from agentsession_core.campaign.capacity import CapacitySearch
    from agentsession_core.judge.thresholds import parse_threshold

    params = parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s"}})
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    search.start(1.0, None)
    for i, (level, outcome, why) in enumerate(probes):
        assert search.next_level() == level
        search.record(level, verdict(i + 1, level, outcome, why))
    assert search.next_level() is None
    return search.document()


def test_a_void_probe_names_the_generator_as_the_limit() -> None:
    saturated = "the load generator was saturated in 5 of 10 s"
    doc = recorded_search((2.0, "pass", None), (4.0, "void", saturated))
    assert doc["status"] == "void" and doc["rate"] is None and doc["level"] is None
    assert "the generator, not the substrate, was the limit" in doc["reason"]
    assert saturated in doc["reason"] and "at least 10 swaps/s" in doc["reason"]
    assert [p["outcome"] for p in doc["probes"]] == ["held", "void"]


def test_the_document_gives_capacity_in_the_populations_unit() -> None:
    doc = recorded_search(
        (2.0, "pass", None),
        (4.0, "break", None),
        (3.0, "pass", None),
        (3.5, "pass", None),
        (3.75, "pass", None),
        (3.75, "pass", None),  # the confirmation
    )
    assert doc["status"] == "found" and doc["unit"] == "swaps/s"
    assert doc["level"] == 3.75 and doc["rate"] == 18.75  # 5 swaps/s at 1x
    assert doc["broke_at_level"] == 4.0 and doc["broke_at_rate"] == 20.0
    assert doc["threshold"] == "TimeToWake: p99 < 2s" and doc["resolution"] == 0.1
    assert doc["confirmed"] is True
    assert doc["confirmation"] == {
        "level": 3.75,
        "rate": 18.75,
        "index": 6,
        "outcome": "held",
        "why": None,
        "step_down": None,
    }
    assert [p["stage"] for p in doc["probes"]] == ["search"] * 5 + ["confirm"]
    assert doc["bound_kind"] == "slo" and doc["bound_by"] == "TimeToWake: p99 < 2s"
    assert "confirmed: held again" in doc["reason"]
    assert "bound by TimeToWake: p99 < 2s" in doc["reason"]
    read = GateDocument.read(gate(doc), "here").capacity
    assert read is not None and read.confirmation is not None and read.bound_kind == "slo"


def test_a_broken_confirmation_is_said_with_its_step_down() -> None:
    doc = recorded_search(
        (2.0, "pass", None),
        (4.0, "pass", None),
        (8.0, "break", None),
        (6.0, "break", None),
        (5.0, "break", None),
        (4.5, "break", None),
        (4.25, "break", None),
        (4.0, "break", None),  # the confirmation breaks
        (3.6, "pass", None),  # 4 × 0.9: nothing held at or above it below 4
    )
    assert doc["status"] == "found" and doc["confirmed"] is False
    assert doc["level"] == 3.6 and doc["broke_at_level"] == 4.0
    confirmation = doc["confirmation"]
    assert confirmation["outcome"] == "broke" and confirmation["index"] == 8
    assert confirmation["step_down"] == {
        "level": 3.6,
        "rate": 18.0,
        "index": 9,
        "outcome": "held",
        "why": None,
        "already_held": False,
    }
    assert [p["stage"] for p in doc["probes"]][-2:] == ["confirm", "step-down"]
    assert "not confirmed: the confirmation at 4x broke" in doc["reason"]
    assert doc["bound_by"] == "TimeToWake: p99 < 2s"  # what the confirmation missed


def test_a_step_down_already_held_names_the_window_that_held_it() -> None:
    doc = recorded_search(
        (2.0, "pass", None),
        (4.0, "break", None),
        (3.0, "break", None),
        (2.5, "pass", None),  # window 4
        (2.75, "pass", None),  # 3 − 2.75 within 0.1 × 2.75: converged
        (2.75, "break", None),  # the confirmation; its step down (2.475x) is below 2.5x
    )
    assert doc["status"] == "found" and doc["confirmed"] is False
    assert doc["level"] == 2.5 and doc["rate"] == 12.5 and doc["broke_at_level"] == 2.75
    step = doc["confirmation"]["step_down"]
    assert step["already_held"] is True and step["level"] == 2.5 and step["index"] == 4
    assert "stepped down once to 2.5x, held already: not held a second time" in doc["reason"]
    assert [p["stage"] for p in doc["probes"]][-1] == "confirm"  # no sixth probe


def test_what_bound_a_capacity_that_failures_broke_is_the_failure_rule() -> None:
    from agentsession_core.campaign.capacity import CapacitySearch
    from agentsession_core.judge.thresholds import parse_threshold
    from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict

    rule = "TimeToWake: failure_ratio < 0.02"
    params = parse(
        CampaignParams,
        {"thresholds": [rule], "search": {"threshold": "TimeToWake: p99 < 2s"}},
    )
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    search.start(1.0, None)
    levels = [(2.0, True), (4.0, False), (3.0, True), (3.5, True), (3.75, True), (3.75, True)]
    for index, (level, ok) in enumerate(levels, 1):
        assert search.next_level() == level
        slo = ThresholdResult("TimeToWake: p99 < 2s", 900.0, 40, True, "")
        failures = ThresholdResult(rule, 0.0 if ok else 0.3, 40, ok, "")
        outcome = "pass" if ok else "break"
        search.record(level, WindowVerdict(index, level, 0.0, 1.0, outcome, [slo, failures]))
    assert search.next_level() is None
    doc = search.document()
    assert doc["status"] == "found" and doc["confirmed"] is True and doc["level"] == 3.75
    assert doc["bound_kind"] == "failures" and doc["bound_by"] == rule


def test_what_bound_a_search_that_found_nothing_is_said_too() -> None:
    above = recorded_search(*[(level, "pass", None) for level in (2.0, 4.0, 8.0, 16.0)])
    assert above["status"] == "above" and above["confirmed"] is None
    assert above["bound_kind"] == "max_level" and above["bound_by"] == "max_level 16x"
    assert above["confirmation"] is None
    saturated = "the load generator was saturated in 5 of 10 s"
    void = recorded_search((2.0, "pass", None), (4.0, "void", saturated))
    assert void["bound_kind"] == "generator"
    assert void["bound_by"] == "the load generator's saturation"


def test_a_search_that_never_ran_names_no_bound() -> None:
    from agentsession_core.campaign.capacity import CapacitySearch
    from agentsession_core.judge.thresholds import parse_threshold

    params = parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s"}})
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    search.start(None, "the first level (1x) did not hold (break): no search")
    doc = search.document()
    assert doc["status"] == "not run" and doc["bound_by"] is None and doc["bound_kind"] is None
    assert doc["confirmed"] is None and doc["confirmation"] is None


def test_a_confirmation_an_abort_rule_ended_puts_the_capacity_below_it() -> None:
    from agentsession_core.campaign.capacity import CapacitySearch
    from agentsession_core.judge.thresholds import parse_threshold

    params = parse(
        CampaignParams,
        {
            "abort": {"rules": ["TimeToWake: failure_ratio < 0.5"]},
            "search": {"threshold": "TimeToWake: p99 < 2s"},
        },
    )
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    search.start(1.0, None)
    for i, (level, outcome) in enumerate([(2.0, "pass"), (4.0, "break"), (3.0, "pass")], 1):
        assert search.next_level() == level
        search.record(level, verdict(i, level, outcome))
    for i, level in enumerate([3.5, 3.75], 4):
        assert search.next_level() == level
        search.record(level, verdict(i, level, "pass"))
    assert search.next_level() == 3.75 and search.next_stage == "confirm"
    cut = verdict(6, 3.75, "aborted")
    cut.abort_reason = "abort rule 'TimeToWake: failure_ratio < 0.5' tripped over the last 3s: x"
    search.record(3.75, cut)
    search.stop(f"an abort rule tripped at 3.75x: {cut.abort_reason}")
    doc = search.document()
    assert doc["status"] == "aborted" and doc["level"] == 3.5 and doc["broke_at_level"] == 3.75
    assert doc["bound_kind"] == "abort" and doc["bound_by"] == "TimeToWake: failure_ratio < 0.5"
    assert doc["confirmation"]["outcome"] == "aborted" and doc["confirmed"] is None


def searched_until(stopped: str | None, outcome: str = "aborted") -> dict:
    """Held at 2x, then the probe at 4x ended early: by the run's own stop (`stopped`: the
    substrate gone, a signal) or, with None, by an abort rule."""
    from agentsession_core.campaign.capacity import CapacitySearch
    from agentsession_core.judge.thresholds import parse_threshold

    params = parse(CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s"}})
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    search.start(1.0, None)
    assert search.next_level() == 2.0
    search.record(2.0, verdict(1, 2.0, "pass"))
    assert search.next_level() == 4.0
    cut = verdict(2, 4.0, outcome)
    cut.abort_reason = stopped or "Step_*: failure_ratio 0.6 >= 0.5"
    search.record(4.0, cut, stopped=stopped)
    if stopped is None:
        search.stop(f"an abort rule tripped at 4x: {cut.abort_reason}")
    assert search.next_level() is None
    return search.document()


@pytest.mark.parametrize("outcome", ["aborted", "break"])
def test_a_probe_cut_short_by_an_outage_is_no_break(outcome: str) -> None:
    # issue 29: gate.json said "broke at 3x" where the probe was cut short by the outage.
    outage = "substrate unreachable for 11s (6 probes in a row unanswered; last: TRANSPORT)"
    doc = searched_until(outage, outcome)
    assert doc["status"] == "aborted", doc
    assert [p["outcome"] for p in doc["probes"]] == ["held", "aborted"]
    assert doc["probes"][-1]["why"] == outage
    assert doc["broke_at_level"] is None and doc["broke_at_rate"] is None, doc
    assert doc["level"] == 2.0 and doc["held_level"] == 2.0
    assert "broke" not in doc["reason"] and outage in doc["reason"], doc["reason"]
    assert "cut short, not a break" in doc["reason"], doc["reason"]


def test_a_probe_an_abort_rule_ended_still_marks_the_level_broken() -> None:
    doc = searched_until(None)
    assert doc["status"] == "aborted" and doc["level"] == 2.0
    assert doc["broke_at_level"] == 4.0 and "broke at 20 swaps/s (4x)" in doc["reason"]
