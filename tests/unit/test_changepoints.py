"""The change-point rule on short series (issue 27): which of Otava's tests judges a split,
why the permutation test alone could not name a step two nights old, and that one slow
night is not a change point (docs/SPEC.md §6.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from otava.change_point_divisive.calculator import PairDistanceCalculator
from otava.change_point_divisive.detector import ChangePointDetector
from otava.change_point_divisive.significance_test import PermutationsSignificanceTester

from agentsession_core.judge import changepoints
from agentsession_core.judge.changepoints import change_points

# ms: four nights of one build, then two nights of a build whose wakes take twice as long.
FOUR_THEN_TWO = [20.1, 18.7, 21.4, 19.6, 40.9, 39.2]


def test_a_doubling_two_nights_old_is_named_at_its_first_night_by_the_t_test() -> None:
    (cp,) = change_points(FOUR_THEN_TWO)
    assert cp.index == 4 and cp.test == "t-test"
    assert cp.before == pytest.approx(19.85) and cp.after == pytest.approx(40.05)
    assert cp.relative is not None and 0.9 < cp.relative < 1.1
    assert cp.probability is not None
    assert cp.probability <= changepoints.MAX_PVALUE * changepoints.TTEST_SHARE
    assert cp.to_dict()["test"] == "t-test"


def test_no_number_of_permutations_gets_six_nights_below_p_0_01() -> None:
    """4 + 2 values have C(6, 2) = 15 arrangements and the split and its mirror give the
    same statistic, so a permutation p-value stays near 2/15 whatever is drawn: the reason
    short splits go to the t-test."""
    assert math.comb(6, 2) < changepoints.MIN_ARRANGEMENTS
    # Five times the rule's 100 permutations; more move p no lower (1999 give 0.15).
    tester = PermutationsSignificanceTester(
        max_pvalue=1.0, permutations=499, calculator=PairDistanceCalculator, seed=17
    )
    detector = ChangePointDetector(significance_tester=tester, calculator=PairDistanceCalculator)
    # At max_pvalue 1 every split is kept; the step's own is the one at 4.
    (step,) = [p for p in detector.get_change_points(np.log(FOUR_THEN_TWO)) if p.index == 4]
    assert 0.05 < step.stats.pvalue < 0.2


def test_one_slow_night_is_a_spike_not_a_change_point() -> None:
    newest_slow = FOUR_THEN_TWO[:5]  # the second slow night has not run yet
    then_normal = [*FOUR_THEN_TWO[:5], 20.3]
    five_then_one = [*FOUR_THEN_TWO[:4], 19.9, 40.9]
    assert change_points(newest_slow) == []
    assert change_points(then_normal) == [] and change_points(five_then_one) == []


def test_a_step_with_many_nights_either_side_is_judged_by_the_permutation_test() -> None:
    rng = np.random.default_rng(4)
    values = [float(v) for v in 200.0 * np.exp(0.12 * rng.standard_t(4, 24))]
    values[12:] = [2.0 * v for v in values[12:]]
    (cp,) = change_points(values)
    assert abs(cp.index - 12) <= 1 and cp.test == "permutation"
    assert cp.probability is not None and cp.probability <= changepoints.MAX_PVALUE


def test_the_rule_says_both_tests_and_their_thresholds() -> None:
    rule = changepoints.rule()
    assert rule["max_pvalue"] == 0.01 and rule["ttest_max_pvalue"] == pytest.approx(0.002)
    assert rule["permutations"] == 100 and rule["min_arrangements"] == 2000
    assert rule["min_side"] == 2 and rule["min_values"] == 5 and rule["seed"] == 17
    assert "TTestSignificanceTester" in rule["method"]
    assert "PermutationsSignificanceTester" in rule["method"]


# --------------------------------------------------------------------------- long series
def _long_series(seed: int, n: int, steps: dict[int, float]) -> list[float]:
    rng = np.random.default_rng(seed)
    values = 200.0 * np.exp(0.12 * rng.standard_t(4, n))
    for at, factor in steps.items():
        values[at:] *= factor
    return [float(v) for v in values]


def test_a_long_series_is_judged_in_windows_and_its_steps_found_where_they_are() -> None:
    # 450 nights: longer than a window (100), so judged window by window; two steps, one up,
    # one down.
    values = _long_series(3, 450, {130: 1.6, 330: 0.6})
    found = change_points(values)
    near = [cp for cp in found if any(abs(cp.index - at) <= 1 for at in (130, 330))]
    assert len({min((130, 330), key=lambda a: abs(a - cp.index)) for cp in near}) == 2
    # Everything else the windows name would be a false change point: none on this series.
    assert len(found) == len(near)
    up = next(cp for cp in near if abs(cp.index - 130) <= 1)
    assert up.relative is not None and 0.4 < up.relative < 0.8


def test_a_long_step_free_series_has_no_change_point_and_the_rule_names_the_windows() -> None:
    assert change_points(_long_series(5, 600, {})) == []
    rule = changepoints.rule()
    assert rule["window"] == 100 and rule["window_step"] == 50  # docs/SPEC.md §6.4
    assert "longer than 100 values: judged in windows of 100" in rule["long_series"]


def test_windows_cover_the_whole_series_and_give_indexes_of_the_whole() -> None:
    # A step in the last few values of a long series is still in a window (the last reaches
    # the newest value), at its index in the whole series.
    values = _long_series(7, 260, {250: 2.0})
    (cp,) = change_points(values)
    assert cp.index == 250
