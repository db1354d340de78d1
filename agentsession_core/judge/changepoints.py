"""Change points of a nightly series: where a headline figure moved and stayed moved.

The detector is Apache Otava's E-divisive means (`ChangePointDetector` with
`PairDistanceCalculator`): it proposes the split that divides the series most, and a
significance test decides whether that split is a change point, recursively. Which test
decides depends on the split (docs/SPEC.md §6.4; measured in bench/changepoints.py,
bench/RESULTS.md "Change points on short series"):

* the permutation test (`PermutationsSignificanceTester`, 100 permutations, p ≤ max_pvalue)
  where the split's two sides can be arranged in at least MIN_ARRANGEMENTS ways. It assumes
  nothing about the noise and accounts for the search over splits, and on long series it
  kept false change points near 1 %;
* Otava's t-test (`TTestSignificanceTester`, p ≤ max_pvalue · TTEST_SHARE) where they cannot.
  A permutation p-value cannot fall below the share of arrangements that look at least as
  extreme as the one observed (the split itself and its mirror: 2 / C(a + b, a)), so four
  nights of one build and two of another (15 arrangements) can never reach p ≤ 0.01 however
  many permutations are drawn: the newest nights of any history are judged by the t-test.
  It is stricter than max_pvalue because it trusts near-normal noise and knows nothing of
  the search.

Either way a change point needs MIN_SIDE values on both sides: one slow night is a spike,
not a level that stayed moved (the gate judges single nights; history.json marks the nights
it judged regressed). Only this module knows the library: `change_points` is the seam.

A series longer than WINDOW values is judged in windows of WINDOW values (docs/SPEC.md §6.4,
bench/RESULTS.md "Change points on long series"): E-divisive over the whole series costs the
square of its length per permutation (a history of 10,000 nights would hold matrices of 10⁸
values), so the windows follow Otava's own split step (`otava.analysis.split`): each window
starts half a window after the previous one, or at the last change point found in it when
that is later, and the last is the one that reaches the newest value. In a window, a split
the permutation test would judge goes to it only when Otava's t-test on the same split gives
p ≤ SCREEN_PVALUE (most windows of a long series hold no step: the t-test spares them their
permutations); the rest of the rule is the same. A series of at most WINDOW values is judged
whole, exactly as before.

Latencies are judged on log values, so a step is a ratio (a +50 % step looks the same at
10 ms and at 2 s) and one slow night weighs less. The step size is reported in the series'
own units, as medians of the segments either side (medians, because a single spike must not
make a step look bigger than it is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from statistics import median
from typing import Any

LIBRARY = "apache-otava"
METHOD = (
    "e-divisive means (otava ChangePointDetector, PairDistanceCalculator); each split judged "
    "by the permutation test (PermutationsSignificanceTester) where its sides have at least "
    "min_arrangements arrangements, else by the t-test (TTestSignificanceTester)"
)
MAX_PVALUE = 0.01
# The t-test's threshold is this share of max_pvalue (0.002 at the default).
TTEST_SHARE = 0.2
PERMUTATIONS = 100
# They are drawn this many at a time, and no more once so many permuted splits looked at
# least as extreme as the observed one that p ≤ max_pvalue is out of reach: the same
# decision as drawing all of them (the draws come from one seeded stream either way), in a
# fraction of the time for the split that ends each search.
CHUNK = 10
# C(a + b, min(a, b)) from which the permutation test judges a split into a and b values:
# its p-value floor (2 / C) is then a tenth of 0.002 or less, so the floor never decides.
MIN_ARRANGEMENTS = 2000
# A change point needs this many values on each side (one night alone is a spike).
MIN_SIDE = 2
# The permutation test shuffles with numpy's Generator seeded from this: the same series
# always gives the same change points.
SEED = 17
# A history needs this many judged nights before any change point is named.
MIN_VALUES = 5
# A series longer than this is judged in windows of this many values, each next one
# WINDOW_STEP on (or at the last change point found); a calculator never sees more values.
WINDOW = 100
WINDOW_STEP = WINDOW // 2
# In a window, a split goes to the permutation test only when the t-test gives at most this.
SCREEN_PVALUE = 0.01
# log(0) is not a number; a latency of 0 ms means "below the clock", so it is floored.
_LOG_FLOOR = 1e-3

PERMUTATION_TEST = "permutation"
T_TEST = "t-test"
# A window's split the t-test screen kept from the permutation test (never a change point).
SCREENED = "screened"


@dataclass(frozen=True)
class ChangePoint:
    """`index`: the first value after the change. `before`/`after`: medians of the values
    from the previous change point (or the start) to this one, and from here to the next
    (or the end), in the series' units. `statistic`/`probability`: the library's
    divergence statistic (q̂) and the p-value of the test that judged the split, `test`
    ("permutation" or "t-test")."""

    index: int
    before: float
    after: float
    statistic: float | None = None
    probability: float | None = None
    test: str | None = None

    @property
    def absolute(self) -> float:
        return self.after - self.before

    @property
    def relative(self) -> float | None:
        return None if self.before == 0 else self.after / self.before - 1.0

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), absolute=self.absolute, relative=self.relative)


def rule() -> dict[str, Any]:
    """What decided the change points, for history.json."""
    try:
        library_version: str | None = version(LIBRARY)
    except PackageNotFoundError:  # pragma: no cover - it is a dependency
        library_version = None
    return {
        "library": LIBRARY,
        "version": library_version,
        "method": METHOD,
        "max_pvalue": MAX_PVALUE,
        "ttest_max_pvalue": MAX_PVALUE * TTEST_SHARE,
        "permutations": PERMUTATIONS,
        "min_arrangements": MIN_ARRANGEMENTS,
        "min_side": MIN_SIDE,
        "seed": SEED,
        "min_values": MIN_VALUES,
        "window": WINDOW,
        "window_step": WINDOW_STEP,
        "screen_max_pvalue": SCREEN_PVALUE,
        "long_series": (
            f"longer than {WINDOW} values: judged in windows of {WINDOW}, each "
            f"{WINDOW_STEP} on or at the last change point found (otava.analysis.split's "
            f"step); a split goes to the permutation test only when the t-test gives p <= "
            f"{SCREEN_PVALUE}"
        ),
        "scale": "log for latencies, linear otherwise",
        "step": "medians of the segments either side",
    }


def _tester(max_pvalue: float, ttest_pvalue: float, seed: int, screen: float | None = None) -> Any:
    """A significance tester for Otava's detector that hands each split to the library's
    permutation tester or its t-test (module docstring) and names which one judged it;
    `screen` (a window of a long series): a split the permutation test would judge goes to
    it only when the t-test gives p <= screen."""
    import numpy as np
    from otava.analysis import TTestSignificanceTester
    from otava.change_point_divisive.base import ChangePoint as OtavaChangePoint
    from otava.change_point_divisive.base import SignificanceTester
    from otava.change_point_divisive.calculator import PairDistanceCalculator
    from otava.change_point_divisive.significance_test import (
        PermutationsSignificanceTester,
        PermutationStats,
    )

    # p = extreme / (permutations + 1) (the library's estimate): at most this many extreme.
    most_extreme = math.floor(max_pvalue * (PERMUTATIONS + 1))

    class Tester(SignificanceTester):
        def __init__(self) -> None:
            super().__init__(max_pvalue)
            self.permutation = PermutationsSignificanceTester(
                max_pvalue=max_pvalue,
                permutations=CHUNK,
                calculator=PairDistanceCalculator,
                seed=seed,
            )
            self.ttest = TTestSignificanceTester(ttest_pvalue)
            self.tests: dict[int, str] = {}
            self.too_short: set[int] = set()

        def change_point(self, candidate: Any, series: Any, intervals: list[slice]) -> Any:
            index = int(candidate.index)
            left = right = 0
            for interval in intervals:
                start = interval.start or 0
                stop = len(series) if interval.stop is None else interval.stop
                if start < index < stop:
                    left, right = index - start, stop - index
                    break
            if min(left, right) < MIN_SIDE:
                self.too_short.add(index)
            if math.comb(left + right, min(left, right)) < MIN_ARRANGEMENTS:
                self.tests[index] = T_TEST
                return self.ttest.change_point(candidate, series, intervals)
            if screen is not None and index not in self.too_short:
                screened = self.ttest.change_point(candidate, series, intervals)
                if not screened.stats.pvalue <= screen:  # NaN (no spread) included
                    self.tests[index] = SCREENED
                    return screened
            self.tests[index] = PERMUTATION_TEST
            return self.permuted(candidate, series, intervals)

        def permuted(self, candidate: Any, series: Any, intervals: list[slice]) -> Any:
            qhats, extreme, drawn = [], 0, 0
            while drawn < PERMUTATIONS and extreme <= most_extreme:
                stats = self.permutation.change_point(candidate, series, intervals).stats
                qhats.append(stats.permuted_qhats)
                extreme += int(stats.extreme_qhat_perm)
                drawn += int(stats.n_perm)
            stats = PermutationStats(
                pvalue=extreme / (drawn + 1),
                permuted_qhats=np.concatenate(qhats),
                extreme_qhat_perm=extreme,
                n_perm=drawn,
            )
            return OtavaChangePoint.from_candidate(candidate, stats)

        def is_significant(self, point: Any) -> bool:
            index = int(point.index)
            if index in self.too_short or self.tests[index] == SCREENED:
                return False
            tester = self.permutation if self.tests[index] == PERMUTATION_TEST else self.ttest
            return bool(tester.is_significant(point))

    return Tester()


def _detect(
    values: Sequence[float],
    max_pvalue: float,
    seed: int,
    ttest_share: float = TTEST_SHARE,
    *,
    screen: float | None = None,
) -> list[tuple[Any, str]]:
    """Otava's change points of `values` (the whole series at once), oldest first, each with
    the test that judged it."""
    import numpy as np
    from otava.change_point_divisive.calculator import PairDistanceCalculator
    from otava.change_point_divisive.detector import ChangePointDetector

    tester = _tester(max_pvalue, max_pvalue * ttest_share, seed, screen)
    detector = ChangePointDetector(significance_tester=tester, calculator=PairDistanceCalculator)
    points = detector.get_change_points(np.asarray(values, dtype=float))
    return [(p, tester.tests[int(p.index)]) for p in sorted(points, key=lambda p: int(p.index))]


def _detect_windowed(
    values: Sequence[float],
    max_pvalue: float,
    seed: int,
    ttest_share: float = TTEST_SHARE,
    *,
    window: int = WINDOW,
    step: int | None = None,
    screen: float | None = SCREEN_PVALUE,
) -> list[tuple[Any, str]]:
    """A long series' change points (module docstring): Otava's split step with this rule's
    tester in each window; indexes are the whole series'. Each window starts afresh (its own
    seeded permutations), so a window judges the same whatever came before it."""
    step = step or window // 2
    found: dict[int, tuple[Any, str]] = {}
    start, n = 0, len(values)
    while start < n:
        end = min(start + window, n)
        points = _detect(values[start:end], max_pvalue, seed, ttest_share, screen=screen)
        for point, test in points:
            point.index = int(point.index) + start
            found.setdefault(point.index, (point, test))
        if end == n:
            break
        start = max(max((int(p.index) for p, _ in points), default=start), start + step)
    return [found[i] for i in sorted(found)]


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def change_points(
    values: Sequence[float],
    *,
    log: bool = True,
    max_pvalue: float = MAX_PVALUE,
    seed: int = SEED,
) -> list[ChangePoint]:
    """The change points of `values` (oldest first), each with its step size."""
    if len(values) < MIN_VALUES:
        return []
    scaled = [math.log(max(v, _LOG_FLOOR)) for v in values] if log else [float(v) for v in values]
    if len(scaled) > WINDOW:
        found = _detect_windowed(scaled, max_pvalue, seed)
    else:
        found = _detect(scaled, max_pvalue, seed)
    bounds = [0, *(int(p.index) for p, _ in found), len(values)]
    out: list[ChangePoint] = []
    for i, (point, test) in enumerate(found, start=1):
        stats = getattr(point, "stats", None)
        out.append(
            ChangePoint(
                index=bounds[i],
                before=float(median(values[bounds[i - 1] : bounds[i]])),
                after=float(median(values[bounds[i] : bounds[i + 1]])),
                statistic=_number(getattr(point, "qhat", None)),
                probability=_number(getattr(stats, "pvalue", None)),
                test=test,
            )
        )
    return out


__all__ = ["MAX_PVALUE", "ChangePoint", "change_points", "rule"]
