"""Change points of a nightly series: where a headline figure moved and stayed moved.

The detector is Apache Otava's E-divisive means with its permutation test
(``otava.analysis.compute_change_points_orig``), chosen by measuring the candidates on
nightly-like series with the run-to-run noise we see (bench/changepoints.py, bench/RESULTS.md
"Change points on nightly series"): it kept false change points on step-free series near 1 %
for p50 and p99 alike while finding most +50 % steps in 20 nights. Only this module knows
the library: `change_points` is the seam to swap it.

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
METHOD = "e-divisive means, permutation test (otava.analysis.compute_change_points_orig)"
MAX_PVALUE = 0.01
PERMUTATIONS = 100  # fixed by the library for this method
# The permutation test shuffles with numpy's Generator seeded from this: the same series
# always gives the same change points.
SEED = 17
# E-divisive needs a few points either side of a split before its test means anything.
MIN_VALUES = 5
# log(0) is not a number; a latency of 0 ms means "below the clock", so it is floored.
_LOG_FLOOR = 1e-3


@dataclass(frozen=True)
class ChangePoint:
    """`index`: the first value after the change. `before`/`after`: medians of the values
    from the previous change point (or the start) to this one, and from here to the next
    (or the end), in the series' units. `statistic`/`probability`: the library's
    divergence statistic (q̂) and permutation p-value."""

    index: int
    before: float
    after: float
    statistic: float | None = None
    probability: float | None = None

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
        "permutations": PERMUTATIONS,
        "seed": SEED,
        "min_values": MIN_VALUES,
        "scale": "log for latencies, linear otherwise",
        "step": "medians of the segments either side",
    }


def _detect(values: Sequence[float], max_pvalue: float, seed: int) -> list[Any]:
    import numpy as np
    from otava.analysis import compute_change_points_orig

    points, _ = compute_change_points_orig(
        np.asarray(values, dtype=float), max_pvalue=max_pvalue, seed=seed
    )
    return sorted(points, key=lambda p: int(p.index))


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
    found = _detect(scaled, max_pvalue, seed)
    bounds = [0, *(int(p.index) for p in found), len(values)]
    out: list[ChangePoint] = []
    for i, point in enumerate(found, start=1):
        stats = getattr(point, "stats", None)
        out.append(
            ChangePoint(
                index=bounds[i],
                before=float(median(values[bounds[i - 1] : bounds[i]])),
                after=float(median(values[bounds[i] : bounds[i + 1]])),
                statistic=_number(getattr(point, "qhat", None)),
                probability=_number(getattr(stats, "pvalue", None)),
            )
        )
    return out


__all__ = ["MAX_PVALUE", "ChangePoint", "change_points", "rule"]
