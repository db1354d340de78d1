"""The figures one comparison judges are controlled together (judge/false_discovery.py): a
`regressed` that is no discovery of its family is `unchanged`, saying why; a family of one
is its own rule's alone; each rule's p-value agrees with the rule it stands for."""

from __future__ import annotations

import math
import random

import pytest

from agentsession_core.judge.decision import classify, margin_of, z_two_sided
from agentsession_core.judge.false_discovery import controlled, level, p_worse
from agentsession_core.judge.judged_figure import normal_interval, rejudged

CONFIDENCE = 0.99
MARGIN = 0.2


def figure(metric: str, d: float, se: float, rule: str = "whole-interval") -> dict:
    """A judged figure as compare.py records it."""
    low, high = normal_interval(d, se, CONFIDENCE)
    status = classify(
        d, low, high, se=se, margin=margin_of(metric, MARGIN), confidence=CONFIDENCE, rule=rule
    )
    return {
        "metric": metric,
        "log_change": d,
        "se_log": se,
        "interval": [math.expm1(low), math.expm1(high)],
        "status": status,
        "regression": status == "regressed",
    }


def nulls(count: int) -> list[dict]:
    return [figure(f"Step_{k}.p50", 0.0, 0.05) for k in range(count)]


# log(1.2) = 0.182; with se 0.02 the whole 99 % interval of d = 0.25 lies beyond it
# (low 0.198): p about 0.0003, a discovery in any family below about 17 figures.
STRONG = ("TimeToWake.p50", 0.30, 0.02)
BARELY = ("TimeToWake.p90", 0.25, 0.02)


def test_a_family_of_one_is_judged_as_its_rule_judges_it() -> None:
    alone = [figure(*BARELY)]
    assert alone[0]["status"] == "regressed"
    out, family = controlled(
        alone, rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN
    )
    assert out[0]["status"] == "regressed" and family["family"] == 1
    assert out[0]["p_worse"] == out[0]["p_adjusted"] < level("whole-interval", CONFIDENCE)


def test_a_barely_regressed_figure_among_forty_is_no_discovery() -> None:
    metrics = [figure(*STRONG), figure(*BARELY), *nulls(38)]
    assert [m["status"] for m in metrics[:2]] == ["regressed", "regressed"]
    out, family = controlled(
        metrics, rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN
    )
    assert family == {"method": "bh", "family": 40, "level": 0.005}
    strong, barely = out[0], out[1]
    assert strong["status"] == "regressed" and strong["p_adjusted"] <= 0.005
    assert barely["status"] == "unchanged" and barely["regression"] is False
    assert barely["p_adjusted"] > 0.005
    assert "not a discovery of the 40 figures judged together" in barely["why"]
    # Benjamini-Hochberg: the k-th smallest p is scaled by 40/k (here k = 2), then monotone.
    assert barely["p_adjusted"] == pytest.approx(min(1.0, barely["p_worse"] * 40 / 2))
    # ... and with ten figures the same barely regressed figure is a discovery again.
    ten, _ = controlled(
        [figure(*STRONG), figure(*BARELY), *nulls(8)],
        rule="whole-interval",
        confidence=CONFIDENCE,
        max_regression=MARGIN,
    )
    assert ten[1]["status"] == "regressed"


def test_no_control_keeps_every_figure_s_own_status() -> None:
    metrics = [figure(*STRONG), figure(*BARELY), *nulls(38)]
    out, family = controlled(
        metrics, rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN, method="none"
    )
    assert family["method"] == "none"
    assert [m["status"] for m in out] == [m["status"] for m in metrics]
    assert out[1]["p_adjusted"] == out[1]["p_worse"]


def test_benjamini_yekutieli_is_stricter_than_hochberg() -> None:
    metrics = [figure(*STRONG), figure(*BARELY), *nulls(8)]
    bh, _ = controlled(metrics, rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN)
    by, _ = controlled(
        metrics, rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN, method="by"
    )
    assert all(b["p_adjusted"] >= h["p_adjusted"] for b, h in zip(by, bh, strict=True))
    assert by[1]["p_adjusted"] > bh[1]["p_adjusted"]


@pytest.mark.parametrize("rule", ["whole-interval", "significant", "margin-test"])
def test_each_rule_s_p_value_decides_as_the_rule_does(rule: str) -> None:
    """Alone at its level, a figure's p-value calls exactly the regressions its rule calls
    (the rule's other condition, significant's d > m, aside)."""
    draw = random.Random(7)
    alpha = level(rule, CONFIDENCE)
    margin = margin_of("TimeToWake.p50", MARGIN)
    for _ in range(500):
        d, se = draw.uniform(-0.5, 0.8), draw.uniform(0.005, 0.3)
        m = figure("TimeToWake.p50", d, se, rule)
        p = p_worse(m, rule=rule, max_regression=MARGIN)
        assert p is not None
        called = p < alpha and (rule != "significant" or d > margin)
        assert called == (m["status"] == "regressed"), (d, se, p)
    assert z_two_sided(CONFIDENCE) > 0


def test_an_inconclusive_figure_is_no_member_of_the_family() -> None:
    lost = {"metric": "WakeFirstTouch.p99", "status": "inconclusive", "se_log": None}
    out, family = controlled(
        [figure(*BARELY), lost], rule="whole-interval", confidence=CONFIDENCE, max_regression=MARGIN
    )
    assert family["family"] == 1 and out[1] is lost and out[0]["status"] == "regressed"


def test_re_judging_a_stored_comparison_controls_its_family_again() -> None:
    metrics, _ = controlled(
        [figure(*STRONG), figure(*BARELY), *nulls(38)],
        rule="whole-interval",
        confidence=CONFIDENCE,
        max_regression=MARGIN,
    )
    section = {"status": "compared", "metrics": metrics}
    alone = rejudged(
        section,
        max_regression=MARGIN,
        confidence=CONFIDENCE,
        rule="whole-interval",
        method="none",
    )
    assert alone["regressions"] == ["TimeToWake.p50", "TimeToWake.p90"]
    assert "why" not in alone["metrics"][1]  # the earlier downgrade's reason is gone
    again = rejudged(section, max_regression=MARGIN, confidence=CONFIDENCE, rule="whole-interval")
    assert again["regressions"] == ["TimeToWake.p50"]
    assert again["false_discovery"] == {"method": "bh", "family": 40, "level": 0.005}
