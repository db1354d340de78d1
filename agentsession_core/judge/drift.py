"""Across windows (docs/SPEC.md §6): drift of the headline percentiles and the ramp result."""

from __future__ import annotations

from collections.abc import Iterable

from agentsession_core.judge.verdict import HEADLINE_ROWS, WindowVerdict

DRIFT_PERCENTILES = ("p50", "p90", "p99")


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def drift(verdicts: list[WindowVerdict]) -> dict[str, float]:
    """Least-squares slope (ms per window) of each headline percentile, over the judged
    (pass/break) windows at the first level; a metric needs two windows to have a slope."""
    if not verdicts:
        return {}
    first_level = verdicts[0].level
    judged = [v for v in verdicts if v.level == first_level and v.outcome in ("pass", "break")]
    series: dict[str, list[tuple[float, float]]] = {}
    for v in judged:
        for section in HEADLINE_ROWS:
            values = v.headline.get(section)
            if not values:
                continue
            for key in DRIFT_PERCENTILES:
                if key in values:
                    series.setdefault(f"{section}.{key}", []).append((v.index, values[key]))
    return {metric: _slope(points) for metric, points in sorted(series.items()) if len(points) >= 2}


def ramp_result(verdicts: Iterable[WindowVerdict]) -> dict[str, float | None]:
    """Levels in the order they ran: a level breaks when any of its windows broke or was
    aborted, and holds when at least one passed and none broke; void-only levels say
    nothing. The ramp stops counting at the first broken level."""
    by_level: dict[float, list[str]] = {}
    for v in verdicts:
        by_level.setdefault(v.level, []).append(v.outcome)
    last_held: float | None = None
    first_broken: float | None = None
    for level, outcomes in by_level.items():
        if "break" in outcomes or "aborted" in outcomes:
            first_broken = level
            break
        if "pass" in outcomes:
            last_held = level
    return {"last_held_level": last_held, "first_broken_level": first_broken}


__all__ = ["DRIFT_PERCENTILES", "drift", "ramp_result"]
