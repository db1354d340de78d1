"""achieved_rps and its target in one unit per population kind, the load's own rows in the
threshold language (ResidentShortfall, `* awake`, events stats), and the default thresholds
per kind (docs/SPEC.md §6)."""

from __future__ import annotations

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.rules import DEFAULT_THRESHOLDS_BY_KIND
from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import evaluate, intended_rate, judge_window, select
from agentsession_core.measure.recorder import NS_PER_S
from tests.unit.test_judge import MONO0, book, recorder, window


def due_window(kind: str, name: str, *, due_per_s: int, steps_per_s: int, seconds: int = 10):
    rec, clock = recorder()
    for s in range(seconds):
        for i in range(due_per_s):
            rec.row(kind, name).event(MONO0 + s * NS_PER_S + (i + 1) * NS_PER_S // (due_per_s + 1))
        book(rec, "http", "Step_01_read", second=s, n=steps_per_s, latency_ms=20, seed=s)
    return window(rec, clock, 0, seconds)


@pytest.mark.parametrize(("kind", "name"), [("closed", "StepsDue"), ("turns", "Arrivals")])
def test_closed_and_turns_achieve_steps_against_the_steps_their_model_put_due(
    kind: str, name: str
) -> None:
    rule = parse_threshold("achieved_rps >= 0.95 * target")
    healthy = due_window(kind, name, due_per_s=8, steps_per_s=8)
    assert intended_rate(healthy) == pytest.approx(8.0)
    result = evaluate(rule, healthy, {"target": intended_rate(healthy), "awake": None})
    assert result.passed is True, result.detail
    slow = due_window(kind, name, due_per_s=8, steps_per_s=6)
    result = evaluate(rule, slow, {"target": intended_rate(slow)})
    assert result.passed is False and "needs >= 7.6" in result.detail


def test_resident_shortfall_is_judged_against_awake() -> None:
    rec, clock = recorder()
    for s in range(10):
        rec.row("turnover", "ResidentShortfall").event(MONO0 + s * NS_PER_S + 1, 3 if s < 2 else 0)
    w = window(rec, clock, 0, 10)
    rule = parse_threshold("ResidentShortfall: events_per_s <= 0.02 * awake")
    assert rule.reference == "awake"
    held = evaluate(rule, w, {"target": 5.0, "awake": 50})
    assert held.passed is True and held.observed == pytest.approx(0.6)  # 6 slot-seconds / 10 s
    missed = evaluate(rule, w, {"target": 5.0, "awake": 20})
    assert missed.passed is False
    assert evaluate(rule, w, {"target": 5.0, "awake": None}).passed is None  # not a turnover
    assert evaluate(parse_threshold("turnover_ResidentShortfall: events > 5"), w, 1.0).passed
    # A count-only row is not a request: "all requests" leaves it out.
    assert select(w, None).count == 0 and select(w, "ResidentShortfall").events == 6


def test_only_known_references_scale_a_value() -> None:
    with pytest.raises(UsageError, match="only '\\* target' or '\\* awake'"):
        parse_threshold("achieved_rps > 0.9 * sessions")


@pytest.mark.parametrize("kind", ["closed", "turns", "turnover"])
def test_each_kind_gets_its_own_default_thresholds(kind: str) -> None:
    awake = {"awake": 2} if kind == "turnover" else {}
    params = CampaignParams(population={"kind": kind, "sessions": 4, **awake})
    texts = [t.text for t in params.thresholds]
    assert texts == list(DEFAULT_THRESHOLDS_BY_KIND[kind])
    assert "achieved_rps >= 0.95 * target" in texts
    shortfall = [t for t in texts if "ResidentShortfall" in t]
    assert bool(shortfall) == (kind == "turnover")
    given = CampaignParams(population={"kind": kind}, thresholds=["count > 1"])
    assert [t.text for t in given.thresholds] == ["count > 1"]


def test_a_closed_window_at_its_think_rate_passes_the_closed_defaults() -> None:
    """The false break of issue #11: steps per second against a session count."""
    w = due_window("closed", "StepsDue", due_per_s=3, steps_per_s=3)
    params = CampaignParams(population={"kind": "closed", "sessions": 10})
    verdict = judge_window(
        w,
        params.thresholds,
        index=0,
        level=1.0,
        target={"target": intended_rate(w), "awake": None},
    )
    assert verdict.outcome == "pass", [r.detail for r in verdict.results]
